/* C versions of scan.py's text primitives; scan.py holds the reference.
 *
 * `check` must run over a 500k-line tree no slower than ruff, and in
 * CPython the per-character and per-occurrence loops of the scan are what
 * stands in the way. Each function here returns exactly what its Python twin
 * in migrate_v3/scan.py returns (tests/test_speedups.py compares them on the
 * whole installed max tree and on generated text); scan.py falls back to the
 * Python twins when this module is not built.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

typedef struct {
    int kind;
    const void *data;
    Py_ssize_t len;
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
        Py_UCS4 c = AT(t, i);
        if ((c != '"' && c != '\'') || !is_triple(kind, t, i, c)) {
            i++;
            continue;
        }
        Py_ssize_t close = i + 3;
        while (close + 2 < t->len && !is_triple(kind, t, close, c))
            close++;
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

typedef struct {
    PyObject *names;
    Py_ssize_t shortest, longest;
    uint64_t lengths;        /* bit n: a name is n characters long (n < 64) */
    unsigned char first[256]; /* first[c]: a name starts with character c (c < 256) */
    Offsets s_starts, s_ends, i_starts, i_ends;
} UsesQuery;

/* Appends (start, end) per use to out; -1 on error. A use starts a run of word
 * characters that no "." precedes, and the run is one of the names. */
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
        PyObject *span = Py_BuildValue("(nn)", start, dotted_end(kind, t, end));
        int status = span == NULL ? -1 : PyList_Append(out, span);
        Py_XDECREF(span);
        if (status < 0)
            return -1;
    }
    return 0;
}

/* scan._code_uses: the (start, end) of each dotted use of `names` outside the import
 * statements, triple-quoted strings, one-line strings and comments, in order. */
static PyObject *py_uses(PyObject *self, PyObject *args) {
    PyObject *obj, *lists[4];
    UsesQuery q = {0};
    if (!PyArg_ParseTuple(args, "UO!O!O!O!O!:uses", &obj, &PyTuple_Type, &q.names, &PyList_Type, &lists[0],
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
        (out = PyList_New(0)) != NULL) {
        int status = 0;
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

static PyMethodDef methods[] = {
    {"triple_quoted", py_triple_quoted, METH_O, "(starts, ends) of the triple-quoted strings of a source."},
    {"uses", py_uses, METH_VARARGS, "(start, end) of the dotted uses of names outside strings, comments and imports."},
    {"in_line_string_or_comment", py_in_line_string_or_comment, METH_VARARGS,
     "Whether an offset sits in a one-line string or a comment of its line."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_speedups", NULL, -1, methods};

PyMODINIT_FUNC PyInit__speedups(void) {
    for (int c = 0; c < 256; c++)
        WORD[c] = c == '_' || Py_UNICODE_ISALNUM((Py_UCS4)c);
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddStringConstant(m, "SOURCE_SHA256", SPEEDUPS_SOURCE_SHA256) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
