"""The V3 port of V2 ``Identity`` (``migrate_v3/knowledge/ports/identity.py``): no weights on
either side, and the staged graph returns its input's type (nothing compiled)."""

from __future__ import annotations


def test_identity_port_has_no_weights_and_returns_its_input_type() -> None:
    from max.dtype import DType
    from max.experimental import functional as F
    from max.graph import DeviceRef, TensorType
    from max.nn import Identity as V2Identity

    from migrate_v3.knowledge.ports.identity import Identity

    v2 = V2Identity()
    with F.lazy():
        v3 = Identity()
    assert dict(v2.raw_state_dict()) == {}
    assert dict(v3.parameters) == {}
    input_type = TensorType(DType.bfloat16, [3, "seq", 8], device=DeviceRef.CPU())
    out2 = v2.trace(input_type).output_types[0]
    staged = v3.trace(input_type)
    layout = staged.out_layouts[0]
    assert "mo.output %arg0 " in str(staged)  # the input itself is the output: no op in between
    assert (str(layout.dtype), [str(d) for d in layout.shape]) == (str(out2.dtype), [str(d) for d in out2.shape])
    assert [str(d) for d in layout.shape] == ["3", "seq", "8"]
