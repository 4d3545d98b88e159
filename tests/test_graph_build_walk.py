"""``graph_build._walk_functions`` walks statements only: same functions, same order as a full visitor."""

from __future__ import annotations

import libcst as cst

from codemods.graph_build import _walk_functions

SOURCE = '''
def a():
    def a_inner():
        pass
    x = lambda: 1
class C:
    def m(self):
        pass
    async def am(self):
        pass
if cond:
    def b(): pass
elif other:
    def c(): pass
else:
    def d(): pass
try:
    def e(): pass
except ValueError:
    def f(): pass
else:
    def g(): pass
finally:
    def h(): pass
for i in x:
    def i_(): pass
else:
    def j(): pass
while w:
    def k(): pass
with ctx:
    def l_(): pass
match v:
    case 1:
        def m_(): pass
    case _:
        def n(): pass
'''


def _visitor_order(module: cst.Module) -> list[str]:
    found: list[str] = []

    class _V(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            found.append(node.name.value)

    module.visit(_V())
    return found


def test_same_functions_in_the_same_order_as_a_visitor() -> None:
    module = cst.parse_module(SOURCE)
    names = [f.name.value for f in _walk_functions(module.body)]
    assert names == _visitor_order(module)
    assert len(names) == 17
