/*
 * One partition's records, read from librdkafka and packed as a block chunk, without the GIL.
 *
 * The receiver's consumer threads spend most of their GIL time on records: confluent-kafka
 * builds a Message object (and a bytes object per key, value and topic) for each one, and the
 * thread then reads the columns back out of those objects and packs them with msgpack.
 * Here one call takes up to max_messages records of the partition's own librdkafka queue
 * (rd_kafka_consume_batch_queue) and writes them straight into the chunk layout of
 * reliable_kafka/storage/block_format.py, byte for byte what pack_chunk() writes for the same
 * records; the GIL is held only to build the one bytes object of the result.
 *
 * Nothing is linked: packed_fetch.py passes the addresses of the two librdkafka functions of
 * the library confluent-kafka loaded, and the queue handle. rd_kafka_message_t is librdkafka's
 * public struct, whose layout has not changed since 0.9 (rdkafka.h).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int err; /* rd_kafka_resp_err_t */
    void *rkt;
    int32_t partition;
    void *payload;
    size_t len;
    void *key;
    size_t key_len;
    int64_t offset;
    void *_private;
} rd_kafka_message_t;

typedef Py_ssize_t (*consume_batch_queue_fn)(void *rkqu, int timeout_ms, rd_kafka_message_t **messages,
                                             size_t size);
typedef void (*message_destroy_fn)(rd_kafka_message_t *message);

/* A consume batch bigger than this is a caller's mistake, not a batch size. */
#define MAX_BATCH 1000000

/* ---- msgpack, as msgpack-python's packb(..., use_bin_type=True) writes it ----------------- */

static size_t array_header_size(size_t n) { return n < 16 ? 1 : n < 65536 ? 3 : 5; }

static size_t uint_size(uint64_t v) {
    return v < 128 ? 1 : v < 256 ? 2 : v < 65536 ? 3 : v <= UINT32_MAX ? 5 : 9;
}

static size_t str_size(size_t len) { return (len < 32 ? 1 : len < 256 ? 2 : len < 65536 ? 3 : 5) + len; }

static size_t bin_size(const void *data, size_t len) {
    if (data == NULL) return 1; /* nil */
    return (len < 256 ? 2 : len < 65536 ? 3 : 5) + len;
}

static unsigned char *put_be(unsigned char *p, uint64_t v, int bytes) {
    for (int shift = 8 * (bytes - 1); shift >= 0; shift -= 8) *p++ = (unsigned char)(v >> shift);
    return p;
}

static unsigned char *put_array_header(unsigned char *p, size_t n) {
    if (n < 16) {
        *p++ = (unsigned char)(0x90 | n);
        return p;
    }
    if (n < 65536) {
        *p++ = 0xdc;
        return put_be(p, n, 2);
    }
    *p++ = 0xdd;
    return put_be(p, n, 4);
}

static unsigned char *put_uint(unsigned char *p, uint64_t v) {
    if (v < 128) {
        *p++ = (unsigned char)v;
        return p;
    }
    if (v < 256) {
        *p++ = 0xcc;
        return put_be(p, v, 1);
    }
    if (v < 65536) {
        *p++ = 0xcd;
        return put_be(p, v, 2);
    }
    if (v <= UINT32_MAX) {
        *p++ = 0xce;
        return put_be(p, v, 4);
    }
    *p++ = 0xcf;
    return put_be(p, v, 8);
}

/* The header of a str or bin of len bytes whose 8/16/32-bit length types are tag8/16/32. */
static unsigned char *put_length(unsigned char *p, size_t len, unsigned char tag8, unsigned char tag16,
                                 unsigned char tag32) {
    if (len < 256) {
        *p++ = tag8;
        return put_be(p, len, 1);
    }
    if (len < 65536) {
        *p++ = tag16;
        return put_be(p, len, 2);
    }
    *p++ = tag32;
    return put_be(p, len, 4);
}

static unsigned char *put_str(unsigned char *p, const char *s, size_t len) {
    if (len < 32)
        *p++ = (unsigned char)(0xa0 | len);
    else
        p = put_length(p, len, 0xd9, 0xda, 0xdb);
    memcpy(p, s, len);
    return p + len;
}

static unsigned char *put_bin(unsigned char *p, const void *data, size_t len) {
    if (data == NULL) {
        *p++ = 0xc0; /* nil */
        return p;
    }
    p = put_length(p, len, 0xc4, 0xc5, 0xc6);
    memcpy(p, data, len);
    return p + len;
}

/* ---- one fetch ---------------------------------------------------------------------------- */

enum { FETCH_OK, FETCH_NO_MEMORY, FETCH_WRONG_PARTITION, FETCH_NEGATIVE_OFFSET };

typedef struct {
    Py_ssize_t consumed; /* messages taken from the queue, records and errors */
    size_t records;
    size_t size;
    unsigned char *data; /* malloc'd chunk, NULL when records == 0 */
    int64_t first, last;
    int32_t seen_partition;
} fetched_t;

/* Packs the non-error messages of messages[0..n) as the chunk
 * [topic, partition, [key...], [value...], [offset...]]. Runs without the GIL. */
static int pack(rd_kafka_message_t **messages, Py_ssize_t n, const char *topic, size_t topic_len,
                int32_t partition, fetched_t *out) {
    size_t keys = 0, values = 0, offsets = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const rd_kafka_message_t *m = messages[i];
        if (m->err) continue;
        if (m->partition != partition) {
            out->seen_partition = m->partition;
            return FETCH_WRONG_PARTITION;
        }
        if (m->offset < 0) return FETCH_NEGATIVE_OFFSET;
        out->records++;
        keys += bin_size(m->key, m->key_len);
        values += bin_size(m->payload, m->len);
        offsets += uint_size((uint64_t)m->offset);
    }
    if (out->records == 0) return FETCH_OK;
    out->size = 1 + str_size(topic_len) + uint_size((uint64_t)partition) +
                3 * array_header_size(out->records) + keys + values + offsets;
    unsigned char *p = out->data = malloc(out->size);
    if (p == NULL) return FETCH_NO_MEMORY;
    *p++ = 0x95; /* fixarray of 5 */
    p = put_str(p, topic, topic_len);
    p = put_uint(p, (uint64_t)partition);
    p = put_array_header(p, out->records);
    for (Py_ssize_t i = 0; i < n; i++)
        if (!messages[i]->err) p = put_bin(p, messages[i]->key, messages[i]->key_len);
    p = put_array_header(p, out->records);
    for (Py_ssize_t i = 0; i < n; i++)
        if (!messages[i]->err) p = put_bin(p, messages[i]->payload, messages[i]->len);
    p = put_array_header(p, out->records);
    out->first = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (messages[i]->err) continue;
        if (out->first < 0) out->first = messages[i]->offset;
        out->last = messages[i]->offset;
        p = put_uint(p, (uint64_t)messages[i]->offset);
    }
    return FETCH_OK;
}

/* [(error code, the error's text or None), ...] of the error messages among messages[0..n). */
static PyObject *errors_of(rd_kafka_message_t **messages, Py_ssize_t n) {
    PyObject *errors = PyList_New(0);
    for (Py_ssize_t i = 0; errors != NULL && i < n; i++) {
        const rd_kafka_message_t *m = messages[i];
        if (m == NULL) continue;
        PyObject *error = m->payload ? Py_BuildValue("(iy#)", m->err, (const char *)m->payload, (Py_ssize_t)m->len)
                                     : Py_BuildValue("(iO)", m->err, Py_None);
        if (error == NULL || PyList_Append(errors, error) < 0) Py_CLEAR(errors);
        Py_XDECREF(error);
    }
    return errors;
}

PyDoc_STRVAR(fetch_doc,
             "fetch(queue, consume_batch_queue, message_destroy, timeout_ms, max_messages, topic, partition)\n"
             "--\n\n"
             "Up to max_messages of a partition queue, as (chunk bytes or None, records, first offset,\n"
             "last offset, [(error code, error text bytes or None), ...]). The first three arguments are\n"
             "addresses: the rd_kafka_queue_t and librdkafka's two functions.");

static PyObject *fetch(PyObject *self, PyObject *args) {
    unsigned long long queue, consume_address, destroy_address;
    int timeout_ms, partition;
    Py_ssize_t max_messages, topic_len;
    const char *topic;
    if (!PyArg_ParseTuple(args, "KKKins#i", &queue, &consume_address, &destroy_address, &timeout_ms,
                          &max_messages, &topic, &topic_len, &partition))
        return NULL;
    if (!queue || !consume_address || !destroy_address) {
        PyErr_SetString(PyExc_ValueError, "null queue or function address");
        return NULL;
    }
    if (partition < 0 || timeout_ms < 0) {
        PyErr_Format(PyExc_ValueError, "partition and timeout must be >= 0, got %d and %d ms", partition,
                     timeout_ms);
        return NULL;
    }
    if (max_messages < 1 || max_messages > MAX_BATCH) {
        PyErr_Format(PyExc_ValueError, "max_messages must be in [1, %d], got %zd", MAX_BATCH, max_messages);
        return NULL;
    }
    consume_batch_queue_fn consume = (consume_batch_queue_fn)(uintptr_t)consume_address;
    message_destroy_fn destroy = (message_destroy_fn)(uintptr_t)destroy_address;
    rd_kafka_message_t **messages = PyMem_RawMalloc(sizeof(*messages) * (size_t)max_messages);
    if (messages == NULL) return PyErr_NoMemory();

    fetched_t out = {0};
    int status;
    Py_BEGIN_ALLOW_THREADS
    out.consumed = consume((void *)(uintptr_t)queue, timeout_ms, messages, (size_t)max_messages);
    status = out.consumed > 0 ? pack(messages, out.consumed, topic, (size_t)topic_len, partition, &out) : FETCH_OK;
    /* The records are copied out; the error messages are read below, with the GIL. */
    for (Py_ssize_t i = 0; i < out.consumed; i++) {
        if (!messages[i]->err) {
            destroy(messages[i]);
            messages[i] = NULL;
        }
    }
    Py_END_ALLOW_THREADS

    PyObject *result = NULL;
    if (out.consumed < 0) {
        /* Only an invalid queue makes rd_kafka_consume_batch_queue fail. */
        PyErr_SetString(PyExc_RuntimeError, "rd_kafka_consume_batch_queue failed");
    } else if (status == FETCH_NO_MEMORY) {
        PyErr_NoMemory();
    } else if (status == FETCH_WRONG_PARTITION) {
        PyErr_Format(PyExc_RuntimeError, "the queue of partition %d delivered a record of partition %d",
                     partition, (int)out.seen_partition);
    } else if (status == FETCH_NEGATIVE_OFFSET) {
        PyErr_SetString(PyExc_RuntimeError, "a record without an offset");
    } else {
        PyObject *errors = errors_of(messages, out.consumed);
        PyObject *data = out.records ? PyBytes_FromStringAndSize((const char *)out.data, (Py_ssize_t)out.size)
                                     : Py_NewRef(Py_None);
        if (errors != NULL && data != NULL)
            result = Py_BuildValue("(OnLLO)", data, (Py_ssize_t)out.records, (long long)out.first,
                                   (long long)out.last, errors);
        Py_XDECREF(errors);
        Py_XDECREF(data);
    }
    free(out.data);
    /* librdkafka moved the partition's position when it handed the messages out; destroying
     * them only frees them. */
    for (Py_ssize_t i = 0; i < out.consumed; i++)
        if (messages[i] != NULL) destroy(messages[i]);
    PyMem_RawFree(messages);
    return result;
}

static PyMethodDef methods[] = {
    {"fetch", fetch, METH_VARARGS, fetch_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "reliable_kafka.kafka.client._packed_fetch",
    .m_doc = "A partition's records read from librdkafka and packed as a block chunk, without the GIL.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__packed_fetch(void) { return PyModule_Create(&module); }
