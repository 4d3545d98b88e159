/* C versions of scan.py's text primitives; scan.py holds the reference.
 *
 * `check` must run over a 500k-line tree no slower than ruff, and in
 * CPython the per-character and per-occurrence loops of the scan are what
 * stands in the way. Each function here returns exactly what its Python twin
 * in migrate_v3/scan.py returns (tests/test_speedups.py compares them on the
 * whole installed max tree and on generated text); scan.py falls back to the
 * Python twins when this module is not built.
 */
#define _GNU_SOURCE /* memmem, memrchr */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* What these functions are: scan.py uses the module only when this matches its
 * _SPEEDUPS_API, so a stale build (an old wheel, a build/ directory) is never used.
 * Bump both whenever a function is added, removed or changes what it returns. */
#define SPEEDUPS_API 1
#include <string.h>

typedef struct {
    int kind;
    const void *data;
    Py_ssize_t len;
    PyObject *obj; /* the str itself (borrowed) */
} Text;

static int text_of(PyObject *obj, Text *t) {
    if (!PyUnicode_Check(obj)) {
        PyErr_SetString(PyExc_TypeError, "text must be a str");
        return -1;
    }
    if (PyUnicode_READY(obj) < 0)
        return -1;
    t->kind = PyUnicode_KIND(obj);
    t->data = PyUnicode_DATA(obj);
    t->len = PyUnicode_GET_LENGTH(obj);
    t->obj = obj;
    return 0;
}

/* The loops below are compiled once per string kind (1, 2 or 4 bytes a
 * character): each is an always-inlined function taking the kind, called
 * from a switch with the kind as a constant, so that PyUnicode_READ
 * becomes a plain array read. */
#define AT(t, i) PyUnicode_READ(kind, (t)->data, (i))
#define INLINE static inline __attribute__((always_inline))
#define BY_KIND(kind_value, call)                                                                  \
    switch (kind_value) {                                                                          \
    case PyUnicode_1BYTE_KIND: { const int kind = PyUnicode_1BYTE_KIND; call; break; }          \
    case PyUnicode_2BYTE_KIND: { const int kind = PyUnicode_2BYTE_KIND; call; break; }          \
    default: { const int kind = PyUnicode_4BYTE_KIND; call; break; }                             \
    }

/* WORD[c] for c < 256: str.isalnum() of the character, or c == "_" (filled at import). */
static unsigned char WORD[256];

/* str.isalnum() of one character, or "_": what \w and identifiers are made of. */
static inline int is_word(Py_UCS4 c) { return c < 256 ? WORD[c] : Py_UNICODE_ISALNUM(c); }


/* A Python list of sorted offsets, read as a C array (lists of ints only). */
typedef struct {
    Py_ssize_t *at;
    Py_ssize_t n;
} Offsets;

static int offsets_of(PyObject *list, Offsets *out) {
    if (!PyList_Check(list)) {
        PyErr_SetString(PyExc_TypeError, "span bounds must be lists");
        return -1;
    }
    out->n = PyList_GET_SIZE(list);
    out->at = PyMem_Malloc(sizeof(Py_ssize_t) * (out->n ? out->n : 1));
    if (out->at == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < out->n; i++) {
        out->at[i] = PyLong_AsSsize_t(PyList_GET_ITEM(list, i));
        if (out->at[i] == -1 && PyErr_Occurred()) {
            PyMem_Free(out->at);
            out->at = NULL;
            return -1;
        }
    }
    return 0;
}

/* A set of character pairs (both below 256): 65,536 bits. A needle's first two
 * characters go in, so one look-up per text position rules out almost every
 * position without a data-dependent branch (1-byte strings only). */
typedef struct {
    uint64_t bits[1024];
} Pairs;

static inline void pairs_add(Pairs *set, Py_UCS4 a, Py_UCS4 b) {
    unsigned key = (unsigned)a << 8 | (unsigned)b;
    set->bits[key >> 6] |= (uint64_t)1 << (key & 63);
}

static inline int pairs_has(const Pairs *set, unsigned a, unsigned b) {
    unsigned key = a << 8 | b;
    return (int)(set->bits[key >> 6] >> (key & 63)) & 1;
}

/* Adds a needle's first two characters (any second one for a one-character needle);
 * returns 0 when they do not fit (a character above 255), then no position is ruled out. */
static int pairs_add_needle(Pairs *set, PyObject *needle) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(needle);
    Py_UCS4 a = n > 0 ? PyUnicode_READ_CHAR(needle, 0) : 0;
    if (n == 0 || a > 255)
        return 0;
    if (n == 1) {
        for (unsigned b = 0; b < 256; b++)
            pairs_add(set, a, b);
        return 1;
    }
    Py_UCS4 b = PyUnicode_READ_CHAR(needle, 1);
    if (b > 255)
        return 0;
    pairs_add(set, a, b);
    return 1;
}

/* scan._inside for offsets asked in increasing order: *cursor only moves forward. */
static inline int inside(const Offsets *starts, const Offsets *ends, Py_ssize_t *cursor, Py_ssize_t pos) {
    while (*cursor < starts->n && starts->at[*cursor] <= pos)
        (*cursor)++;
    Py_ssize_t i = *cursor - 1;
    return i >= 0 && i < ends->n && pos < ends->at[i];
}

/* scan._in_line_string_or_comment */
INLINE int in_line_string_or_comment(const int kind, const Text *t, Py_ssize_t pos) {
    Py_ssize_t start = pos;
    while (start > 0 && AT(t, start - 1) != '\n')
        start--;
    Py_UCS4 quote = 0;
    for (Py_ssize_t i = start; i < pos; i++) {
        Py_UCS4 c = AT(t, i);
        if (quote) {
            if (c == '\\')
                i++;
            else if (c == quote)
                quote = 0;
        } else if (c == '#') {
            return 1;
        } else if (c == '"' || c == '\'') {
            quote = c;
        }
    }
    return quote != 0;
}

static PyObject *py_in_line_string_or_comment(PyObject *self, PyObject *args) {
    PyObject *obj;
    Py_ssize_t pos;
    Text t;
    if (!PyArg_ParseTuple(args, "Un:in_line_string_or_comment", &obj, &pos) || text_of(obj, &t) < 0)
        return NULL;
    if (pos < 0 || pos > t.len) {
        PyErr_SetString(PyExc_IndexError, "pos out of range");
        return NULL;
    }
    int found = 0;
    BY_KIND(t.kind, found = in_line_string_or_comment(kind, &t, pos));
    return PyBool_FromLong(found);
}

INLINE int is_triple(const int kind, const Text *t, Py_ssize_t i, Py_UCS4 q) {
    return i + 2 < t->len && AT(t, i) == q && AT(t, i + 1) == q && AT(t, i + 2) == q;
}

static int append_offset(PyObject *list, Py_ssize_t value) {
    PyObject *item = PyLong_FromSsize_t(value);
    int status = item == NULL ? -1 : PyList_Append(list, item);
    Py_XDECREF(item);
    return status;
}

/* Appends the spans of the triple-quoted strings to starts and ends; -1 on error. */
INLINE int triple_quoted(const int kind, const Text *t, PyObject *starts, PyObject *ends) {
    Py_ssize_t i = 0;
    while (i + 2 < t->len) {
        if (kind == PyUnicode_1BYTE_KIND) {
            /* Jump to the next quote of either kind (memchr skips the rest fast). */
            const char *base = (const char *)t->data;
            const char *dq = memchr(base + i, '"', (size_t)(t->len - i));
            const char *sq = memchr(base + i, '\'', (size_t)((dq ? dq - base : t->len) - i));
            const char *quote = sq ? sq : dq;
            if (quote == NULL)
                break;
            i = quote - base;
            if (i + 2 >= t->len)
                break;
        }
        Py_UCS4 c = AT(t, i);
        if ((c != '"' && c != '\'') || !is_triple(kind, t, i, c)) {
            i++;
            continue;
        }
        Py_ssize_t close = i + 3;
        while (close + 2 < t->len && !is_triple(kind, t, close, c)) {
            if (kind == PyUnicode_1BYTE_KIND) { /* on to the next quote of this kind */
                const char *base = (const char *)t->data;
                const char *quote = memchr(base + close + 1, (int)c, (size_t)(t->len - close - 1));
                close = quote == NULL ? t->len : quote - base;
            } else {
                close++;
            }
        }
        Py_ssize_t end = close + 2 < t->len ? close + 3 : t->len;
        if (append_offset(starts, i) < 0 || append_offset(ends, end) < 0)
            return -1;
        i = end;
    }
    return 0;
}

/* scan._triple_quoted: (starts, ends) of the triple-quoted strings, found left to right. */
static PyObject *py_triple_quoted(PyObject *self, PyObject *obj) {
    Text t;
    if (text_of(obj, &t) < 0)
        return NULL;
    PyObject *starts = PyList_New(0), *ends = PyList_New(0);
    int status = starts == NULL || ends == NULL ? -1 : 0;
    if (status == 0)
        BY_KIND(t.kind, status = triple_quoted(kind, &t, starts, ends));
    if (status < 0) {
        Py_XDECREF(starts);
        Py_XDECREF(ends);
        return NULL;
    }
    return Py_BuildValue("(NN)", starts, ends);
}

/* The end of `(?:[ \t]*\.[ \t]*[A-Za-z_]\w*)*` matched at pos. */
INLINE Py_ssize_t dotted_end(const int kind, const Text *t, Py_ssize_t pos) {
    for (;;) {
        Py_ssize_t j = pos;
        while (j < t->len && (AT(t, j) == ' ' || AT(t, j) == '\t'))
            j++;
        if (j >= t->len || AT(t, j) != '.')
            return pos;
        j++;
        while (j < t->len && (AT(t, j) == ' ' || AT(t, j) == '\t'))
            j++;
        if (j >= t->len)
            return pos;
        Py_UCS4 c = AT(t, j);
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'))
            return pos;
        j++;
        while (j < t->len && is_word(AT(t, j)))
            j++;
        pos = j;
    }
}

/* Whether text[start:end] equals one of the names. */
INLINE int is_name(const int kind, const Text *t, Py_ssize_t start, Py_ssize_t end, PyObject *names) {
    Py_ssize_t size = end - start;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(names); k++) {
        PyObject *name = PyTuple_GET_ITEM(names, k);
        if (PyUnicode_GET_LENGTH(name) != size)
            continue;
        int nkind = PyUnicode_KIND(name);
        const void *ndata = PyUnicode_DATA(name);
        Py_ssize_t i = 0;
        while (i < size && PyUnicode_READ(nkind, ndata, i) == AT(t, start + i))
            i++;
        if (i == size)
            return 1;
    }
    return 0;
}

/* out[text[start:stop]].append((start, stop)): the uses grouped by their text. */
static int add_use(PyObject *text, PyObject *out, Py_ssize_t start, Py_ssize_t stop) {
    PyObject *key = PyUnicode_Substring(text, start, stop);
    if (key == NULL)
        return -1;
    PyObject *spans = PyDict_GetItemWithError(out, key); /* borrowed */
    int status = -1;
    if (spans == NULL && !PyErr_Occurred()) {
        spans = PyList_New(0);
        if (spans != NULL && PyDict_SetItem(out, key, spans) == 0)
            Py_DECREF(spans); /* the dict holds it */
        else
            Py_CLEAR(spans);
    }
    if (spans != NULL) {
        PyObject *span = Py_BuildValue("(nn)", start, stop);
        status = span == NULL ? -1 : PyList_Append(spans, span);
        Py_XDECREF(span);
    }
    Py_DECREF(key);
    return status;
}

typedef struct {
    PyObject *names;
    Py_ssize_t shortest, longest;
    uint64_t lengths;        /* bit n: a name is n characters long (n < 64) */
    unsigned char first[256]; /* first[c]: a name starts with character c (c < 256) */
    Offsets s_starts, s_ends, i_starts, i_ends;
} UsesQuery;

/* Adds each use to out (see add_use); -1 on error. A use starts a run of word
 * characters that no "." precedes, and the run is one of the names. */
/* The rest of `uses` at one candidate start; 1 when it was not a use, 0 when added, -1 on error.
 * *next is where the scan goes on. */
INLINE int use_at(const int kind, const Text *t, const UsesQuery *q, Py_ssize_t start, Py_ssize_t *i_cursor,
                  Py_ssize_t *s_cursor, Py_ssize_t *next, PyObject *out) {
    Py_ssize_t end = start + 1;
    while (end < t->len && is_word(AT(t, end)))
        end++;
    *next = end;
    Py_ssize_t size = end - start;
    if (size < q->shortest || size > q->longest || (size < 64 && !((q->lengths >> size) & 1)) ||
        !is_name(kind, t, start, end, q->names))
        return 1;
    if (inside(&q->i_starts, &q->i_ends, i_cursor, start) || inside(&q->s_starts, &q->s_ends, s_cursor, start) ||
        in_line_string_or_comment(kind, t, start))
        return 1;
    return add_use(t->obj, out, start, dotted_end(kind, t, end));
}

/* `uses` for 1-byte strings: a position is looked at only when its character pair
 * starts a name and what precedes it is neither a word character nor ".". */
static int uses_1byte(const Text *t, const UsesQuery *q, const Pairs *pairs, PyObject *out) {
    const int kind = PyUnicode_1BYTE_KIND;
    const Py_UCS1 *p = (const Py_UCS1 *)t->data;
    const Py_ssize_t len = t->len;
    Py_ssize_t s_cursor = 0, i_cursor = 0, i = 0;
    while (i < len) {
        /* The tight part: on to the next position whose pair starts a name (the last
         * position pairs with 0, which only one-character names accept). */
        while (i + 1 < len && !pairs_has(pairs, p[i], p[i + 1]))
            i++;
        if (i + 1 >= len && (i >= len || !pairs_has(pairs, p[i], 0)))
            break;
        if (i > 0 && (WORD[p[i - 1]] || p[i - 1] == '.')) {
            i++;
            continue;
        }
        Py_ssize_t next;
        if (use_at(kind, t, q, i, &i_cursor, &s_cursor, &next, out) < 0)
            return -1;
        i = next;
    }
    return 0;
}

INLINE int uses(const int kind, const Text *t, const UsesQuery *q, PyObject *out) {
    const Py_ssize_t len = t->len;
    Py_ssize_t s_cursor = 0, i_cursor = 0;
    /* Branch only where a run of word characters starts with a name's first
     * character and no word character or "." precedes it: rare, so the loop
     * runs without mispredicted branches at every word boundary. */
    int before = 1; /* the previous character may precede a use */
    for (Py_ssize_t i = 0; i < len; i++) {
        Py_UCS4 c = AT(t, i);
        int word = is_word(c);
        int candidate = before & word & (c < 256 ? q->first[c] : 1);
        before = !word & (c != '.');
        if (!candidate)
            continue;
        Py_ssize_t start = i, end = i + 1;
        while (end < len && is_word(AT(t, end)))
            end++;
        i = end - 1; /* the loop goes on after the run; its last character is a word one */
        before = 0;
        Py_ssize_t size = end - start;
        if (size < q->shortest || size > q->longest || (size < 64 && !((q->lengths >> size) & 1)) ||
            !is_name(kind, t, start, end, q->names))
            continue;
        if (inside(&q->i_starts, &q->i_ends, &i_cursor, start) || inside(&q->s_starts, &q->s_ends, &s_cursor, start) ||
            in_line_string_or_comment(kind, t, start))
            continue;
        Py_ssize_t stop = dotted_end(kind, t, end);
        if (add_use(t->obj, out, start, stop) < 0)
            return -1;
    }
    return 0;
}

/* scan._code_use_groups: {dotted use: [(start, end), ...]} of the uses of `names` outside
 * the import statements, triple-quoted strings, one-line strings and comments, in order. */
static PyObject *py_use_groups(PyObject *self, PyObject *args) {
    PyObject *obj, *lists[4];
    UsesQuery q = {0};
    if (!PyArg_ParseTuple(args, "UO!O!O!O!O!:use_groups", &obj, &PyTuple_Type, &q.names, &PyList_Type, &lists[0],
                          &PyList_Type, &lists[1], &PyList_Type, &lists[2], &PyList_Type, &lists[3]))
        return NULL;
    Text t;
    if (text_of(obj, &t) < 0)
        return NULL;
    q.shortest = PY_SSIZE_T_MAX;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(q.names); k++) {
        PyObject *name = PyTuple_GET_ITEM(q.names, k);
        if (!PyUnicode_Check(name) || PyUnicode_READY(name) < 0) {
            PyErr_SetString(PyExc_TypeError, "names must be str");
            return NULL;
        }
        Py_ssize_t n = PyUnicode_GET_LENGTH(name);
        q.shortest = n < q.shortest ? n : q.shortest;
        q.longest = n > q.longest ? n : q.longest;
        q.lengths |= n < 64 ? (uint64_t)1 << n : 0;
        if (n > 64)
            q.lengths = ~(uint64_t)0; /* rare: let is_name decide */
        Py_UCS4 head = n ? PyUnicode_READ_CHAR(name, 0) : 0;
        if (head < 256)
            q.first[head] = 1;
        else
            memset(q.first, 1, sizeof q.first); /* rare: let is_name decide */
    }
    PyObject *out = NULL;
    if (offsets_of(lists[0], &q.s_starts) == 0 && offsets_of(lists[1], &q.s_ends) == 0 &&
        offsets_of(lists[2], &q.i_starts) == 0 && offsets_of(lists[3], &q.i_ends) == 0 &&
        (out = PyDict_New()) != NULL) {
        int status = 0;
        Pairs pairs = {{0}};
        int fits = 1;
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(q.names) && fits; k++)
            fits = pairs_add_needle(&pairs, PyTuple_GET_ITEM(q.names, k));
        if (t.kind == PyUnicode_1BYTE_KIND && fits)
            status = uses_1byte(&t, &q, &pairs, out);
        else
            BY_KIND(t.kind, status = uses(kind, &t, &q, out));
        if (status < 0)
            Py_CLEAR(out);
    }
    PyMem_Free(q.s_starts.at);
    PyMem_Free(q.s_ends.at);
    PyMem_Free(q.i_starts.at);
    PyMem_Free(q.i_ends.at);
    return out;
}

/* Offset of the literal (ASCII) `lit` in text at or after `from`, or -1. */
INLINE Py_ssize_t find_ascii(const int kind, const Text *t, Py_ssize_t from, const char *lit, Py_ssize_t n) {
    if (kind == PyUnicode_1BYTE_KIND) {
        if (from >= t->len)
            return -1;
        const char *base = (const char *)t->data;
        const char *hit = memmem(base + from, (size_t)(t->len - from), lit, (size_t)n);
        return hit == NULL ? -1 : hit - base;
    }
    for (Py_ssize_t i = from; i + n <= t->len; i++) {
        if (AT(t, i) != (Py_UCS4)(unsigned char)lit[0])
            continue;
        Py_ssize_t k = 1;
        while (k < n && AT(t, i + k) == (Py_UCS4)(unsigned char)lit[k])
            k++;
        if (k == n)
            return i;
    }
    return -1;
}

INLINE int starts_with(const int kind, const Text *t, Py_ssize_t i, const char *lit, Py_ssize_t n) {
    if (i + n > t->len)
        return 0;
    for (Py_ssize_t k = 0; k < n; k++)
        if (AT(t, i + k) != (Py_UCS4)(unsigned char)lit[k])
            return 0;
    return 1;
}

INLINE Py_ssize_t skip_blanks(const int kind, const Text *t, Py_ssize_t i) {
    while (i < t->len && (AT(t, i) == ' ' || AT(t, i) == '\t'))
        i++;
    return i;
}

/* The end of an import's names matched at i: `(?:[^\n#;\\]|\\\n?)*`, after `from`
 * also `\([^)]*\)` (tried first). */
INLINE Py_ssize_t import_body_end(const int kind, const Text *t, Py_ssize_t i, int parens) {
    if (parens && i < t->len && AT(t, i) == '(') {
        Py_ssize_t close = i + 1;
        while (close < t->len && AT(t, close) != ')')
            close++;
        if (close < t->len)
            return close + 1;
    }
    while (i < t->len) {
        Py_UCS4 c = AT(t, i);
        if (c == '\\')
            i += i + 1 < t->len && AT(t, i + 1) == '\n' ? 2 : 1;
        else if (c == '\n' || c == '#' || c == ';')
            break;
        else
            i++;
    }
    return i;
}

typedef struct {
    Py_ssize_t end, module_start, module_end, body_start, body_end; /* module_start -1: `import x` */
} ImportMatch;

/* scan._IMPORT.match(text, i): 1 and *m filled when it matches. */
INLINE int match_import(const int kind, const Text *t, Py_ssize_t i, ImportMatch *m) {
    i = skip_blanks(kind, t, i);
    if (starts_with(kind, t, i, "from", 4)) {
        Py_ssize_t k = skip_blanks(kind, t, i + 4);
        Py_ssize_t blanks = k - (i + 4);
        if (blanks == 0)
            return 0;
        Py_ssize_t run = k;
        while (run < t->len && (is_word(AT(t, run)) || AT(t, run) == '.'))
            run++;
        Py_ssize_t after = skip_blanks(kind, t, run);
        Py_ssize_t body;
        if (after > run && starts_with(kind, t, after, "import", 6) &&
            (body = skip_blanks(kind, t, after + 6)) > after + 6) {
            m->module_start = k;
            m->module_end = run;
        } else if (blanks >= 2 && starts_with(kind, t, k, "import", 6) &&
                   (body = skip_blanks(kind, t, k + 6)) > k + 6) {
            /* `from  import x`: the module is empty, one blank given back to [ \t]+ */
            m->module_start = m->module_end = k - 1;
        } else {
            return 0;
        }
        m->body_start = body;
        m->body_end = m->end = import_body_end(kind, t, body, 1);
        return 1;
    }
    Py_ssize_t body;
    if (!starts_with(kind, t, i, "import", 6) || (body = skip_blanks(kind, t, i + 6)) == i + 6)
        return 0;
    m->module_start = m->module_end = -1;
    m->body_start = body;
    m->body_end = m->end = import_body_end(kind, t, body, 0);
    return 1;
}

/* Appends scan._import_statements' tuples to out; -1 on error. */
INLINE int import_statements(const int kind, const Text *t, PyObject *text, const Offsets *s_starts,
                             const Offsets *s_ends, PyObject *out) {
    Py_ssize_t end = 0, cursor = 0;
    for (Py_ssize_t pos = find_ascii(kind, t, 0, "import", 6); pos >= 0; pos = find_ascii(kind, t, pos + 6, "import", 6)) {
        if (pos < end)
            continue;
        Py_ssize_t line_start = pos;
        while (line_start > 0 && AT(t, line_start - 1) != '\n')
            line_start--;
        ImportMatch m;
        if (!match_import(kind, t, line_start, &m) || m.end <= pos)
            continue;
        end = m.end;
        int relevant;
        if (m.module_start >= 0) {
            relevant = m.module_end > m.module_start &&
                       (AT(t, m.module_start) == '.' || starts_with(kind, t, m.module_start, "max", 3));
        } else {
            relevant = 0;
            for (Py_ssize_t k = m.body_start; k + 3 <= m.body_end && !relevant; k++)
                relevant = starts_with(kind, t, k, "max", 3);
        }
        if (!relevant || inside(s_starts, s_ends, &cursor, line_start))
            continue;
        PyObject *module = Py_None;
        Py_INCREF(module);
        if (m.module_start >= 0) {
            Py_DECREF(module);
            module = PyUnicode_Substring(text, m.module_start, m.module_end);
        }
        PyObject *body = module == NULL ? NULL : PyUnicode_Substring(text, m.body_start, m.body_end);
        PyObject *item = body == NULL ? NULL : Py_BuildValue("(nnOOn)", line_start, m.end, module, body, m.body_start);
        Py_XDECREF(module);
        Py_XDECREF(body);
        int status = item == NULL ? -1 : PyList_Append(out, item);
        Py_XDECREF(item);
        if (status < 0)
            return -1;
    }
    return 0;
}

/* scan._import_statements: (line start, end, module or None, names, names offset) of each
 * import statement that can bind a max or relative name, outside triple-quoted strings. */
static PyObject *py_import_statements(PyObject *self, PyObject *args) {
    PyObject *obj, *lists[2];
    if (!PyArg_ParseTuple(args, "UO!O!:import_statements", &obj, &PyList_Type, &lists[0], &PyList_Type, &lists[1]))
        return NULL;
    Text t;
    if (text_of(obj, &t) < 0)
        return NULL;
    Offsets s_starts = {0}, s_ends = {0};
    PyObject *out = NULL;
    if (offsets_of(lists[0], &s_starts) == 0 && offsets_of(lists[1], &s_ends) == 0 && (out = PyList_New(0)) != NULL) {
        int status = 0;
        BY_KIND(t.kind, status = import_statements(kind, &t, obj, &s_starts, &s_ends, out));
        if (status < 0)
            Py_CLEAR(out);
    }
    PyMem_Free(s_starts.at);
    PyMem_Free(s_ends.at);
    return out;
}

/* One word of an import part: [start, end) in the names. */
typedef struct {
    Py_ssize_t start, end;
} Word;

INLINE int is_blank_in_part(const int kind, const Text *t, Py_ssize_t i) {
    Py_UCS4 c = AT(t, i);
    return c == '\\' || Py_UNICODE_ISSPACE(c);
}

static int equals_ascii(PyObject *text, Py_ssize_t start, Py_ssize_t end, const char *lit) {
    Py_ssize_t n = (Py_ssize_t)strlen(lit);
    if (end - start != n)
        return 0;
    for (Py_ssize_t k = 0; k < n; k++)
        if (PyUnicode_READ_CHAR(text, start + k) != (Py_UCS4)(unsigned char)lit[k])
            return 0;
    return 1;
}

/* Appends the binding of one part (its words, a comment already blanked) to out; -1 on error. */
static int import_part(PyObject *body, PyObject *module, const Word *words, int count, Py_ssize_t off, PyObject *out) {
    PyObject *local = NULL, *target = NULL, *item = NULL;
    int star = 0;
    int aliased = count == 3 && equals_ascii(body, words[1].start, words[1].end, "as");
    if (module == Py_None) {
        if (aliased) {
            local = PyUnicode_Substring(body, words[2].start, words[2].end);
            target = PyUnicode_Substring(body, words[0].start, words[0].end);
        } else {
            Py_ssize_t end = words[0].start;
            while (end < words[0].end && PyUnicode_READ_CHAR(body, end) != '.')
                end++;
            local = PyUnicode_Substring(body, words[0].start, end);
            target = local;
            Py_XINCREF(target);
        }
    } else if (equals_ascii(body, words[0].start, words[0].end, "*")) {
        local = PyUnicode_FromString("*");
        target = module;
        Py_INCREF(target);
        star = 1;
    } else {
        Word name = aliased ? words[2] : words[0];
        local = PyUnicode_Substring(body, name.start, name.end);
        Py_ssize_t size = PyUnicode_GET_LENGTH(module);
        int dotted = size > 0 && PyUnicode_READ_CHAR(module, size - 1) == '.';
        PyObject *first = PyUnicode_Substring(body, words[0].start, words[0].end);
        if (first != NULL)
            target = PyUnicode_FromFormat(dotted ? "%U%U" : "%U.%U", module, first);
        Py_XDECREF(first);
    }
    if (local != NULL && target != NULL)
        item = Py_BuildValue("(OOnO)", local, target, off, star ? Py_True : Py_False);
    Py_XDECREF(local);
    Py_XDECREF(target);
    int status = item == NULL ? -1 : PyList_Append(out, item);
    Py_XDECREF(item);
    return status;
}

INLINE int import_parts(const int kind, const Text *t, PyObject *body, PyObject *module, PyObject *out) {
    Py_ssize_t i = 0;
    int in_comment = 0;
    while (i < t->len) {
        /* A part: a run of characters other than ",()"; a comment (to the line end) is blanks. */
        Py_UCS4 c = AT(t, i);
        if (!in_comment && (c == ',' || c == '(' || c == ')')) {
            i++;
            continue;
        }
        Py_ssize_t off = -1;
        Word words[4];
        int count = 0, in_word = 0;
        for (; i < t->len; i++) {
            c = AT(t, i);
            if (in_comment && c == '\n')
                in_comment = 0;
            else if (!in_comment && c == '#')
                in_comment = 1;
            if (!in_comment && (c == ',' || c == '(' || c == ')'))
                break;
            int blank = in_comment || is_blank_in_part(kind, t, i);
            if (off < 0 && !in_comment && !Py_UNICODE_ISSPACE(c))
                off = i; /* str.lstrip() of the part, its comment blanked */
            if (!blank && !in_word) {
                if (count < 4)
                    words[count].start = i;
                in_word = 1;
            } else if (blank && in_word) {
                if (count < 4)
                    words[count].end = i;
                count++;
                in_word = 0;
            }
        }
        if (in_word) {
            if (count < 4)
                words[count].end = i;
            count++;
        }
        if (count == 0)
            continue;
        if (import_part(body, module, words, count, off < 0 ? i : off, out) < 0)
            return -1;
    }
    return 0;
}

/* scan._import_parts_py: (local, target, offset in names, star) per name the import binds. */
static PyObject *py_import_parts(PyObject *self, PyObject *args) {
    PyObject *module, *body;
    if (!PyArg_ParseTuple(args, "OU:import_parts", &module, &body))
        return NULL;
    if (module != Py_None && (!PyUnicode_Check(module) || PyUnicode_READY(module) < 0)) {
        PyErr_SetString(PyExc_TypeError, "module must be a str or None");
        return NULL;
    }
    Text t;
    if (text_of(body, &t) < 0)
        return NULL;
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    int status = 0;
    BY_KIND(t.kind, status = import_parts(kind, &t, body, module, out));
    if (status < 0) {
        Py_DECREF(out);
        return NULL;
    }
    PyObject *tuple = PyList_AsTuple(out);
    Py_DECREF(out);
    return tuple;
}

/* Appends, per needle, its offsets (as repeated str.find from the end of the last one
 * finds them) to lists[k]; -1 on error. Needles are non-empty; one pass over the text. */
INLINE int find_all(const int kind, const Text *t, PyObject *needles, PyObject *lists) {
    Py_ssize_t count = PyTuple_GET_SIZE(needles);
    Py_ssize_t next[64], size[64];
    Py_UCS4 head[64];
    uint64_t by_head[256] = {0}, wide = 0; /* bit k: needle k starts with that character */
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *needle = PyTuple_GET_ITEM(needles, k);
        next[k] = 0;
        size[k] = PyUnicode_GET_LENGTH(needle);
        head[k] = PyUnicode_READ_CHAR(needle, 0);
        if (head[k] < 256)
            by_head[head[k]] |= (uint64_t)1 << k;
        else
            wide |= (uint64_t)1 << k;
    }
    Pairs pairs = {{0}};
    int fits = kind == PyUnicode_1BYTE_KIND;
    for (Py_ssize_t k = 0; k < count && fits; k++)
        fits = pairs_add_needle(&pairs, PyTuple_GET_ITEM(needles, k));
    for (Py_ssize_t i = 0; i < t->len; i++) {
        if (fits) { /* on to the next position whose pair starts a needle */
            const Py_UCS1 *p = (const Py_UCS1 *)t->data;
            while (i + 1 < t->len && !pairs_has(&pairs, p[i], p[i + 1]))
                i++;
            if (i + 1 >= t->len && (i >= t->len || !pairs_has(&pairs, p[i], 0)))
                break;
        }
        Py_UCS4 c = AT(t, i);
        uint64_t candidates = c < 256 ? by_head[c] : wide;
        while (candidates) {
            int k = __builtin_ctzll(candidates);
            candidates &= candidates - 1;
            Py_ssize_t n = size[k];
            if (c != head[k] || i < next[k] || i + n > t->len)
                continue;
            PyObject *needle = PyTuple_GET_ITEM(needles, k);
            int nkind = PyUnicode_KIND(needle);
            const void *ndata = PyUnicode_DATA(needle);
            Py_ssize_t j = 1;
            while (j < n && PyUnicode_READ(nkind, ndata, j) == AT(t, i + j))
                j++;
            if (j < n)
                continue;
            next[k] = i + n;
            if (append_offset(PyList_GET_ITEM(lists, k), i) < 0)
                return -1;
        }
    }
    return 0;
}

/* scan._find_all_py: [offsets of needle for needle in needles], in one pass. */
static PyObject *py_find_all(PyObject *self, PyObject *args) {
    PyObject *obj, *needles;
    if (!PyArg_ParseTuple(args, "UO!:find_all", &obj, &PyTuple_Type, &needles))
        return NULL;
    Text t;
    if (text_of(obj, &t) < 0)
        return NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(needles);
    if (count > 64) {
        PyErr_SetString(PyExc_ValueError, "at most 64 needles");
        return NULL;
    }
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *needle = PyTuple_GET_ITEM(needles, k);
        if (!PyUnicode_Check(needle) || PyUnicode_READY(needle) < 0 || PyUnicode_GET_LENGTH(needle) == 0) {
            PyErr_SetString(PyExc_ValueError, "needles must be non-empty str");
            return NULL;
        }
    }
    PyObject *lists = PyList_New(count);
    if (lists == NULL)
        return NULL;
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *list = PyList_New(0);
        if (list == NULL) {
            Py_DECREF(lists);
            return NULL;
        }
        PyList_SET_ITEM(lists, k, list);
    }
    int status = 0;
    BY_KIND(t.kind, status = find_all(kind, &t, needles, lists));
    if (status < 0) {
        Py_DECREF(lists);
        return NULL;
    }
    return lists;
}

/* Moves *last up to pos, counting the line ends on the way into *line and keeping
 * *line_start at the start of pos's line. */
INLINE void advance(const int kind, const Text *t, Py_ssize_t pos, Py_ssize_t *last, Py_ssize_t *line,
                    Py_ssize_t *line_start) {
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *p = (const Py_UCS1 *)t->data;
        Py_ssize_t ends = 0;
        for (Py_ssize_t i = *last; i < pos; i++) /* a counting loop the compiler vectorizes */
            ends += p[i] == '\n';
        if (ends) {
            *line += ends;
            const Py_UCS1 *nl = memrchr(p + *last, '\n', (size_t)(pos - *last));
            *line_start = nl - p + 1;
        }
        *last = pos;
        return;
    }
    for (; *last < pos; (*last)++)
        if (AT(t, *last) == '\n') {
            (*line)++;
            *line_start = *last + 1;
        }
}

/* Appends scan._located_py's findings to out (no suppressions); -1 on error. */
INLINE int located(const int kind, const Text *t, PyObject *raw, PyObject *out) {
    Py_ssize_t line = 1, line_start = 0, last = 0, previous = -1;
    PyObject *previous_code = NULL;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(raw); k++) {
        PyObject *item = PyList_GET_ITEM(raw, k);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 3) {
            PyErr_SetString(PyExc_TypeError, "raw sites must be (offset, code, message) tuples");
            return -1;
        }
        Py_ssize_t pos = PyLong_AsSsize_t(PyTuple_GET_ITEM(item, 0));
        if (pos == -1 && PyErr_Occurred())
            return -1;
        if (pos < last || pos > t->len) {
            PyErr_SetString(PyExc_ValueError, "raw sites must be sorted offsets into the text");
            return -1;
        }
        PyObject *code = PyTuple_GET_ITEM(item, 1);
        if (pos == previous && previous_code != NULL) {
            int same = PyObject_RichCompareBool(code, previous_code, Py_EQ);
            if (same < 0)
                return -1;
            if (same)
                continue; /* the same rule at the same site: reported once */
        }
        advance(kind, t, pos, &last, &line, &line_start);
        previous = pos;
        previous_code = code;
        PyObject *finding = Py_BuildValue("(nnOO)", line, pos - line_start + 1, code, PyTuple_GET_ITEM(item, 2));
        int status = finding == NULL ? -1 : PyList_Append(out, finding);
        Py_XDECREF(finding);
        if (status < 0)
            return -1;
    }
    return 0;
}

/* A function taking (text, a list) and returning a new list that fill() fills. */
static PyObject *list_of_text_and_list(PyObject *args, const char *format,
                                       int (*fill)(const Text *, PyObject *, PyObject *)) {
    PyObject *obj, *list;
    if (!PyArg_ParseTuple(args, format, &obj, &PyList_Type, &list))
        return NULL;
    Text t;
    if (text_of(obj, &t) < 0)
        return NULL;
    PyObject *out = PyList_New(0);
    if (out != NULL && fill(&t, list, out) < 0)
        Py_CLEAR(out);
    return out;
}

static int located_any(const Text *t, PyObject *raw, PyObject *out) {
    int status = 0;
    BY_KIND(t->kind, status = located(kind, t, raw, out));
    return status;
}

/* scan._located_py without suppressions: sorted (offset, code, message) -> (line, col, code, message). */
static PyObject *py_located(PyObject *self, PyObject *args) {
    return list_of_text_and_list(args, "UO!:located", located_any);
}

/* Appends (line, col), 1-based, of each offset (sorted) to out; -1 on error. */
INLINE int line_cols(const int kind, const Text *t, PyObject *offsets, PyObject *out) {
    Py_ssize_t line = 1, line_start = 0, last = 0;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(offsets); k++) {
        Py_ssize_t pos = PyLong_AsSsize_t(PyList_GET_ITEM(offsets, k));
        if (pos == -1 && PyErr_Occurred())
            return -1;
        if (pos < last || pos > t->len) {
            PyErr_SetString(PyExc_ValueError, "offsets must be sorted and inside the text");
            return -1;
        }
        advance(kind, t, pos, &last, &line, &line_start);
        PyObject *place = Py_BuildValue("(nn)", line, pos - line_start + 1);
        int status = place == NULL ? -1 : PyList_Append(out, place);
        Py_XDECREF(place);
        if (status < 0)
            return -1;
    }
    return 0;
}

static int line_cols_any(const Text *t, PyObject *offsets, PyObject *out) {
    int status = 0;
    BY_KIND(t->kind, status = line_cols(kind, t, offsets, out));
    return status;
}

/* scan._Positions for sorted offsets, all at once. */
static PyObject *py_line_cols(PyObject *self, PyObject *args) {
    return list_of_text_and_list(args, "UO!:line_cols", line_cols_any);
}

static PyMethodDef methods[] = {
    {"triple_quoted", py_triple_quoted, METH_O, "(starts, ends) of the triple-quoted strings of a source."},
    {"use_groups", py_use_groups, METH_VARARGS,
     "The dotted uses of names outside strings, comments and imports, grouped by their text."},
    {"import_statements", py_import_statements, METH_VARARGS,
     "The import statements of a source that can bind max or relative names."},
    {"import_parts", py_import_parts, METH_VARARGS, "What one import statement's names bind."},
    {"find_all", py_find_all, METH_VARARGS, "Offsets of each needle, all found in one pass."},
    {"located", py_located, METH_VARARGS, "Sorted (offset, code, message) sites as (line, col, code, message)."},
    {"line_cols", py_line_cols, METH_VARARGS, "(line, col) of each of a sorted list of offsets."},
    {"in_line_string_or_comment", py_in_line_string_or_comment, METH_VARARGS,
     "Whether an offset sits in a one-line string or a comment of its line."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_speedups", NULL, -1, methods};

PyMODINIT_FUNC PyInit__speedups(void) {
    for (int c = 0; c < 256; c++)
        WORD[c] = c == '_' || Py_UNICODE_ISALNUM((Py_UCS4)c);
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && (PyModule_AddStringConstant(m, "SOURCE_SHA256", SPEEDUPS_SOURCE_SHA256) < 0 ||
                      PyModule_AddIntConstant(m, "API", SPEEDUPS_API) < 0)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
