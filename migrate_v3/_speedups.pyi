"""Types of the C speed-ups (migrate_v3/_speedups.c); scan.py holds the Python twins."""

SOURCE_SHA256: str

def triple_quoted(text: str, /) -> tuple[list[int], list[int]]: ...
def uses(
    text: str,
    names: tuple[str, ...],
    string_starts: list[int],
    string_ends: list[int],
    import_starts: list[int],
    import_ends: list[int],
    /,
) -> list[tuple[int, int]]: ...
def in_line_string_or_comment(text: str, pos: int, /) -> bool: ...
def import_statements(
    text: str, string_starts: list[int], string_ends: list[int], /
) -> list[tuple[int, int, str | None, str, int]]: ...
def import_parts(module: str | None, body: str, /) -> tuple[tuple[str, str, int, bool], ...]: ...
