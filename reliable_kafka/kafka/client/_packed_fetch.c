/*
 * One partition's records, read from librdkafka and packed as a block chunk, without the GIL.
 *
 * The receiver's consumer threads spend most of their GIL time on records: confluent-kafka
 * builds a Message object (and a bytes object per key, value and topic) for each one, and the
 * thread then reads the columns back out of those objects and packs them with msgpack.
 * Here one call takes up to max_messages records of the partition's own librdkafka queue
 * (rd_kafka_queue_poll, see consume_events) and writes them straight into the chunk layout of
 * reliable_kafka/storage/block_format.py, byte for byte what pack_chunk() writes for the same
 * records; the GIL is held only to build the one bytes object of the result.
 *
 * Nothing is linked: packed_fetch.py passes the addresses of the librdkafka functions of the
 * library confluent-kafka loaded (bind_events, and per call), and the queue handle. rd_kafka_message_t is librdkafka's
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

/* ---- the partition queue, read through librdkafka's event API -----------------------------
 *
 * rd_kafka_consume_batch_queue serves the queue's non-message ops itself, and an error op
 * (rd_kafka_toppar_enq_error: "Local: Unknown partition" while a restarted broker's metadata
 * lacks the partition) calls the client's error_cb right there, on the reading thread.
 * confluent-kafka's error_cb may only run inside one of its own calls (CallState_get asserts
 * cs != NULL): called from here it aborted the process. rd_kafka_queue_poll instead hands
 * every error back as an event, so nothing of the application runs on these threads; each
 * error becomes a message of our own (_private NULL) among the records, in queue order. */

#define EVENT_FETCH 0x2 /* RD_KAFKA_EVENT_FETCH */
#define EVENT_ERROR 0x8 /* RD_KAFKA_EVENT_ERROR */

typedef void *(*queue_poll_fn)(void *rkqu, int timeout_ms);
typedef int (*event_type_fn)(const void *event);
typedef const rd_kafka_message_t *(*event_message_next_fn)(void *event);
typedef int (*event_error_fn)(void *event);
typedef const char *(*event_error_string_fn)(void *event);
typedef void (*event_destroy_fn)(void *event);

static struct {
    queue_poll_fn queue_poll;
    event_type_fn event_type;
    event_message_next_fn event_message_next;
    event_error_fn event_error;
    event_error_string_fn event_error_string;
    event_destroy_fn event_destroy;
    message_destroy_fn message_destroy;
} events;

/* An error event as a message: err, and its text (or NULL) as payload. NULL without memory. */
static rd_kafka_message_t *error_message(void *event) {
    rd_kafka_message_t *m = calloc(1, sizeof(*m));
    if (m == NULL) return NULL;
    m->err = events.event_error(event);
    m->partition = -1;
    m->offset = -1;
    const char *text = events.event_error_string(event);
    if (text != NULL && (m->payload = strdup(text)) != NULL) m->len = strlen(text);
    return m;
}

/* rd_kafka_consume_batch_queue's contract, through events: up to size messages, waiting up to
 * timeout_ms for the first (not for a whole batch). Records and errors in queue order. */
static Py_ssize_t consume_events(void *queue, int timeout_ms, rd_kafka_message_t **messages, size_t size) {
    size_t n = 0;
    while (n < size) {
        void *event = events.queue_poll(queue, n == 0 ? timeout_ms : 0);
        if (event == NULL) break;
        int type = events.event_type(event);
        const rd_kafka_message_t *m = type == EVENT_FETCH ? events.event_message_next(event) : NULL;
        if (m != NULL) {
            messages[n++] = (rd_kafka_message_t *)m; /* freed with its event by message_destroy */
            continue;
        }
        rd_kafka_message_t *error = type == EVENT_ERROR && events.event_error(event) ? error_message(event) : NULL;
        events.event_destroy(event);
        if (error != NULL) messages[n++] = error;
    }
    return (Py_ssize_t)n;
}

/* Frees a message of consume_events: librdkafka's, or an error of our own. */
static void release_message(rd_kafka_message_t *m) {
    if (m->_private != NULL) {
        events.message_destroy(m);
    } else {
        free(m->payload);
        free(m);
    }
}

PyDoc_STRVAR(bind_events_doc,
             "bind_events(queue_poll, event_type, event_message_next, event_error, event_error_string,\n"
             "            event_destroy, message_destroy)\n"
             "--\n\n"
             "Takes the addresses of librdkafka's event functions; returns the addresses of the consume\n"
             "and destroy functions to hand fetch, fetch_columns and fetch_with_metadata.");

static PyObject *bind_events(PyObject *self, PyObject *args) {
    unsigned long long a[7];
    if (!PyArg_ParseTuple(args, "KKKKKKK", &a[0], &a[1], &a[2], &a[3], &a[4], &a[5], &a[6])) return NULL;
    for (int i = 0; i < 7; i++) {
        if (!a[i]) {
            PyErr_SetString(PyExc_ValueError, "null function address");
            return NULL;
        }
    }
    events.queue_poll = (queue_poll_fn)(uintptr_t)a[0];
    events.event_type = (event_type_fn)(uintptr_t)a[1];
    events.event_message_next = (event_message_next_fn)(uintptr_t)a[2];
    events.event_error = (event_error_fn)(uintptr_t)a[3];
    events.event_error_string = (event_error_string_fn)(uintptr_t)a[4];
    events.event_destroy = (event_destroy_fn)(uintptr_t)a[5];
    events.message_destroy = (message_destroy_fn)(uintptr_t)a[6];
    return Py_BuildValue("(KK)", (unsigned long long)(uintptr_t)consume_events,
                         (unsigned long long)(uintptr_t)release_message);
}

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
        if (m == NULL || !m->err) continue; /* fetch destroyed its records already; fetch_columns did not */
        PyObject *error = m->payload ? Py_BuildValue("(iy#)", m->err, (const char *)m->payload, (Py_ssize_t)m->len)
                                     : Py_BuildValue("(iO)", m->err, Py_None);
        if (error == NULL || PyList_Append(errors, error) < 0) Py_CLEAR(errors);
        Py_XDECREF(error);
    }
    return errors;
}

/* The checks fetch and fetch_columns share: every address given, partition and timeout not
 * negative, a batch size in [1, MAX_BATCH]. Sets the ValueError and returns 0 when one fails. */
static int valid_fetch_arguments(int addresses_given, int partition, int timeout_ms, Py_ssize_t max_messages) {
    if (!addresses_given) {
        PyErr_SetString(PyExc_ValueError, "null queue or function address");
        return 0;
    }
    if (partition < 0 || timeout_ms < 0) {
        PyErr_Format(PyExc_ValueError, "partition and timeout must be >= 0, got %d and %d ms", partition,
                     timeout_ms);
        return 0;
    }
    if (max_messages < 1 || max_messages > MAX_BATCH) {
        PyErr_Format(PyExc_ValueError, "max_messages must be in [1, %d], got %zd", MAX_BATCH, max_messages);
        return 0;
    }
    return 1;
}

PyDoc_STRVAR(fetch_doc,
             "fetch(queue, consume, destroy, timeout_ms, max_messages, topic, partition)\n"
             "--\n\n"
             "Up to max_messages of a partition queue, as (chunk bytes or None, records, first offset,\n"
             "last offset, [(error code, error text bytes or None), ...]). The first three arguments are\n"
             "addresses: the rd_kafka_queue_t and the consume and destroy functions bind_events returned.");

/* Raises the Python error for a failed consume or pack (fetch and fetch_with_metadata); 0 when
 * neither failed. */
static int raised_fetch_failure(const fetched_t *out, int status, int partition) {
    if (out->consumed < 0) {
        /* A consume function that failed (consume_events never does). */
        PyErr_SetString(PyExc_RuntimeError, "consuming the partition queue failed");
    } else if (status == FETCH_NO_MEMORY) {
        PyErr_NoMemory();
    } else if (status == FETCH_WRONG_PARTITION) {
        PyErr_Format(PyExc_RuntimeError, "the queue of partition %d delivered a record of partition %d",
                     partition, (int)out->seen_partition);
    } else if (status == FETCH_NEGATIVE_OFFSET) {
        PyErr_SetString(PyExc_RuntimeError, "a record without an offset");
    } else {
        return 0;
    }
    return 1;
}

static PyObject *fetch(PyObject *self, PyObject *args) {
    unsigned long long queue, consume_address, destroy_address;
    int timeout_ms, partition;
    Py_ssize_t max_messages, topic_len;
    const char *topic;
    if (!PyArg_ParseTuple(args, "KKKins#i", &queue, &consume_address, &destroy_address, &timeout_ms,
                          &max_messages, &topic, &topic_len, &partition))
        return NULL;
    if (!valid_fetch_arguments(queue && consume_address && destroy_address, partition, timeout_ms, max_messages))
        return NULL;
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
    if (!raised_fetch_failure(&out, status, partition)) {
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

/* ---- one fetch as Arrow columns ---------------------------------------------------------- */

/* rd_kafka_message_timestamp(); the type is an rd_kafka_timestamp_type_t. */
typedef int64_t (*message_timestamp_fn)(const rd_kafka_message_t *message, int *type);

/* The buffers of one fetch's columns, in the order fetch_columns returns them. */
enum {
    KEY_VALIDITY,
    KEY_OFFSETS,
    KEY_DATA,
    VALUE_VALIDITY,
    VALUE_OFFSETS,
    VALUE_DATA,
    OFFSETS,
    TIMESTAMPS,
    TIMESTAMP_TYPES,
    N_BUFFERS
};

typedef struct {
    Py_ssize_t consumed; /* messages taken from the queue, records and errors */
    Py_ssize_t records;
    size_t key_bytes, value_bytes;
    int null_keys, null_values;
    int64_t first, last;
    int32_t seen_partition;
} measured_t;

/* The sizes of the columns of the non-error messages of messages[0..n). Runs without the GIL. */
static int measure(rd_kafka_message_t **messages, Py_ssize_t n, int32_t partition, measured_t *out) {
    out->first = out->last = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        const rd_kafka_message_t *m = messages[i];
        if (m->err) continue;
        if (m->partition != partition) {
            out->seen_partition = m->partition;
            return FETCH_WRONG_PARTITION;
        }
        if (m->offset < 0) return FETCH_NEGATIVE_OFFSET;
        if (out->first < 0) out->first = m->offset;
        out->last = m->offset;
        out->records++;
        out->key_bytes += m->key ? m->key_len : 0;
        out->value_bytes += m->payload ? m->len : 0;
        out->null_keys |= m->key == NULL;
        out->null_values |= m->payload == NULL;
    }
    return FETCH_OK;
}

/* Writes one binary column (Arrow's large_binary: int64 offsets, so no 2 GiB bound here) of the
 * records: validity is NULL when no record is null. */
static void put_binary(unsigned char *validity, int64_t *offsets, unsigned char *data, const void *item,
                       size_t len, Py_ssize_t row, int64_t *position) {
    if (item != NULL) {
        memcpy(data + *position, item, len);
        *position += (int64_t)len;
        if (validity) validity[row >> 3] |= (unsigned char)(1u << (row & 7));
    }
    offsets[row + 1] = *position;
}

/* Fills the columns of the non-error messages of messages[0..n). Runs without the GIL, into
 * bytes objects nobody else holds yet. */
static void fill(rd_kafka_message_t **messages, Py_ssize_t n, message_timestamp_fn timestamp_of,
                 unsigned char *buffers[N_BUFFERS]) {
    int64_t *key_offsets = (int64_t *)buffers[KEY_OFFSETS], *value_offsets = (int64_t *)buffers[VALUE_OFFSETS];
    int64_t *offsets = (int64_t *)buffers[OFFSETS], *timestamps = (int64_t *)buffers[TIMESTAMPS];
    int32_t *types = (int32_t *)buffers[TIMESTAMP_TYPES];
    int64_t key_position = 0, value_position = 0;
    Py_ssize_t row = 0;
    key_offsets[0] = value_offsets[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const rd_kafka_message_t *m = messages[i];
        if (m->err) continue;
        put_binary(buffers[KEY_VALIDITY], key_offsets, buffers[KEY_DATA], m->key, m->key_len, row,
                   &key_position);
        put_binary(buffers[VALUE_VALIDITY], value_offsets, buffers[VALUE_DATA], m->payload, m->len, row,
                   &value_position);
        offsets[row] = m->offset;
        int type = 0;
        timestamps[row] = timestamp_of(m, &type);
        /* librdkafka's NOT_AVAILABLE, CREATE_TIME, LOG_APPEND_TIME (0, 1, 2) are Kafka's -1, 0, 1. */
        types[row] = (int32_t)type - 1;
        row++;
    }
}

/* New bytes objects of the columns' sizes (validity ones zeroed, or None when no record is
 * null), with their data pointers in buffers; needs the GIL. */
static PyObject *allocate(const measured_t *m, unsigned char *buffers[N_BUFFERS]) {
    size_t rows = (size_t)m->records, bitmap = (rows + 7) / 8;
    const Py_ssize_t sizes[N_BUFFERS] = {
        [KEY_VALIDITY] = m->null_keys ? (Py_ssize_t)bitmap : -1,
        [KEY_OFFSETS] = (Py_ssize_t)(8 * (rows + 1)),
        [KEY_DATA] = (Py_ssize_t)m->key_bytes,
        [VALUE_VALIDITY] = m->null_values ? (Py_ssize_t)bitmap : -1,
        [VALUE_OFFSETS] = (Py_ssize_t)(8 * (rows + 1)),
        [VALUE_DATA] = (Py_ssize_t)m->value_bytes,
        [OFFSETS] = (Py_ssize_t)(8 * rows),
        [TIMESTAMPS] = (Py_ssize_t)(8 * rows),
        [TIMESTAMP_TYPES] = (Py_ssize_t)(4 * rows),
    };
    PyObject *columns = PyTuple_New(N_BUFFERS);
    for (int i = 0; columns != NULL && i < N_BUFFERS; i++) {
        PyObject *buffer = sizes[i] < 0 ? Py_NewRef(Py_None) : PyBytes_FromStringAndSize(NULL, sizes[i]);
        if (buffer == NULL) {
            Py_CLEAR(columns);
            break;
        }
        buffers[i] = sizes[i] < 0 ? NULL : (unsigned char *)PyBytes_AS_STRING(buffer);
        if (buffers[i] != NULL && (i == KEY_VALIDITY || i == VALUE_VALIDITY)) memset(buffers[i], 0, bitmap);
        PyTuple_SET_ITEM(columns, i, buffer);
    }
    return columns;
}

/* Up to max_messages of the queue: what it holds now or, when it holds nothing, the first message
 * within timeout_ms with whatever came queued behind it. A batch consume may wait for a whole
 * batch or the timeout (librdkafka's did), so the wait asks for one message; the rest of its fetch response
 * (librdkafka queues a response's messages at once) is taken without waiting, so that a reader
 * that keeps up with its partition does not get every other batch as a single record. Runs
 * without the GIL. */
static Py_ssize_t take_queued(consume_batch_queue_fn consume, void *queue, int timeout_ms,
                              rd_kafka_message_t **messages, Py_ssize_t max_messages) {
    Py_ssize_t taken = consume(queue, 0, messages, (size_t)max_messages);
    if (taken != 0 || timeout_ms == 0) return taken;
    taken = consume(queue, timeout_ms, messages, 1);
    if (taken != 1 || max_messages == 1) return taken;
    Py_ssize_t behind = consume(queue, 0, messages + 1, (size_t)(max_messages - 1));
    return behind > 0 ? 1 + behind : 1;
}

PyDoc_STRVAR(
    fetch_columns_doc,
    "fetch_columns(queue, consume, destroy, message_timestamp, timeout_ms, max_messages,\n"
    "              partition)\n"
    "--\n\n"
    "Up to max_messages of a partition queue (what it holds now or, when it holds nothing, the first\n"
    "record within timeout_ms and those queued behind it), as Arrow-ready column buffers: (records,\n"
    "first offset, last offset, columns or None when it held no record, [(error code, error text\n"
    "bytes or None), ...]).\n"
    "columns is (key validity or None, key offsets, key data, value validity or None, value offsets,\n"
    "value data, offsets, timestamps, timestamp types): validity bitmaps as Arrow's (None when no\n"
    "record is null), int64 value offsets as Arrow's large_binary, int64 offsets and timestamps (ms),\n"
    "int32 timestamp types as Kafka's (-1 none, 0 CreateTime, 1 LogAppendTime), native byte order.\n"
    "The first four arguments are addresses: the rd_kafka_queue_t and librdkafka's three functions.");

static PyObject *fetch_columns(PyObject *self, PyObject *args) {
    unsigned long long queue, consume_address, destroy_address, timestamp_address;
    int timeout_ms, partition;
    Py_ssize_t max_messages;
    if (!PyArg_ParseTuple(args, "KKKKini", &queue, &consume_address, &destroy_address, &timestamp_address,
                          &timeout_ms, &max_messages, &partition))
        return NULL;
    if (!valid_fetch_arguments(queue && consume_address && destroy_address && timestamp_address, partition,
                               timeout_ms, max_messages))
        return NULL;
    consume_batch_queue_fn consume = (consume_batch_queue_fn)(uintptr_t)consume_address;
    message_destroy_fn destroy = (message_destroy_fn)(uintptr_t)destroy_address;
    message_timestamp_fn timestamp_of = (message_timestamp_fn)(uintptr_t)timestamp_address;
    rd_kafka_message_t **messages = PyMem_RawMalloc(sizeof(*messages) * (size_t)max_messages);
    if (messages == NULL) return PyErr_NoMemory();

    measured_t measured = {0};
    int status;
    Py_BEGIN_ALLOW_THREADS
    measured.consumed = take_queued(consume, (void *)(uintptr_t)queue, timeout_ms, messages, max_messages);
    status = measured.consumed > 0 ? measure(messages, measured.consumed, partition, &measured) : FETCH_OK;
    Py_END_ALLOW_THREADS

    PyObject *result = NULL, *columns = NULL;
    if (measured.consumed < 0) {
        /* A consume function that failed (consume_events never does). */
        PyErr_SetString(PyExc_RuntimeError, "consuming the partition queue failed");
        measured.consumed = 0;
    } else if (status == FETCH_WRONG_PARTITION) {
        PyErr_Format(PyExc_RuntimeError, "the queue of partition %d delivered a record of partition %d",
                     partition, (int)measured.seen_partition);
    } else if (status == FETCH_NEGATIVE_OFFSET) {
        PyErr_SetString(PyExc_RuntimeError, "a record without an offset");
    } else if (measured.records == 0) {
        columns = Py_NewRef(Py_None);
    } else {
        /* Allocated with the GIL, filled without it: the records are copied once, into the
         * very objects handed back. */
        unsigned char *buffers[N_BUFFERS] = {0};
        columns = allocate(&measured, buffers);
        if (columns != NULL) {
            Py_BEGIN_ALLOW_THREADS
            fill(messages, measured.consumed, timestamp_of, buffers);
            Py_END_ALLOW_THREADS
        }
    }
    if (columns != NULL) {
        PyObject *errors = errors_of(messages, measured.consumed);
        if (errors != NULL)
            result = Py_BuildValue("(nLLOO)", measured.records, (long long)measured.first,
                                   (long long)measured.last, columns, errors);
        Py_XDECREF(errors);
        Py_DECREF(columns);
    }
    /* librdkafka moved the partition's position when it handed the messages out; destroying
     * them only frees them. */
    for (Py_ssize_t i = 0; i < measured.consumed; i++) destroy(messages[i]);
    PyMem_RawFree(messages);
    return result;
}

/* ---- one fetch as a block chunk, with what a messageHandler sees besides ------------------ */

/* rd_kafka_message_headers() and rd_kafka_header_get_all(); the headers are librdkafka's opaque
 * rd_kafka_headers_t, owned by the message. */
typedef int (*message_headers_fn)(const rd_kafka_message_t *message, void **headers);
typedef int (*header_get_all_fn)(const void *headers, size_t index, const char **name, const void **value,
                                 size_t *size);

/* [(name str, value bytes or None), ...] of a message's headers, as confluent-kafka's
 * Message.headers() builds them (names decoded as UTF-8, strictly); [] when it has none. */
static PyObject *headers_of(const rd_kafka_message_t *m, message_headers_fn headers_fn,
                            header_get_all_fn get_all) {
    PyObject *list = PyList_New(0);
    void *headers = NULL;
    if (list == NULL || headers_fn(m, &headers) != 0 || headers == NULL) return list;
    const char *name;
    const void *value;
    size_t size;
    for (size_t i = 0; get_all(headers, i, &name, &value, &size) == 0; i++) {
        PyObject *header = value ? Py_BuildValue("(sy#)", name, (const char *)value, (Py_ssize_t)size)
                                 : Py_BuildValue("(sO)", name, Py_None);
        if (header == NULL || PyList_Append(list, header) < 0) {
            Py_XDECREF(header);
            Py_DECREF(list);
            return NULL;
        }
        Py_DECREF(header);
    }
    return list;
}

/* ([timestamp ms or None, ...], [timestamp type, ...], [headers, ...]) of the non-error messages
 * of messages[0..n), in order: types as Kafka's (-1 none, 0 CreateTime, 1 LogAppendTime), and no
 * timestamp without a type (brokers before 0.10). Needs the GIL. */
static PyObject *metadata_of(rd_kafka_message_t **messages, Py_ssize_t n, message_timestamp_fn timestamp_of,
                             message_headers_fn headers_fn, header_get_all_fn get_all) {
    PyObject *stamps = PyList_New(0), *types = PyList_New(0), *headers = PyList_New(0), *result = NULL;
    int failed = stamps == NULL || types == NULL || headers == NULL;
    for (Py_ssize_t i = 0; !failed && i < n; i++) {
        const rd_kafka_message_t *m = messages[i];
        if (m->err) continue;
        int type = 0;
        int64_t stamp = timestamp_of(m, &type);
        /* librdkafka's NOT_AVAILABLE, CREATE_TIME, LOG_APPEND_TIME (0, 1, 2) are Kafka's -1, 0, 1. */
        PyObject *stamp_object = type ? PyLong_FromLongLong(stamp) : Py_NewRef(Py_None);
        PyObject *type_object = PyLong_FromLong(type - 1);
        PyObject *header_list = headers_of(m, headers_fn, get_all);
        failed = stamp_object == NULL || type_object == NULL || header_list == NULL ||
                 PyList_Append(stamps, stamp_object) < 0 || PyList_Append(types, type_object) < 0 ||
                 PyList_Append(headers, header_list) < 0;
        Py_XDECREF(stamp_object);
        Py_XDECREF(type_object);
        Py_XDECREF(header_list);
    }
    if (!failed) result = PyTuple_Pack(3, stamps, types, headers);
    Py_XDECREF(stamps);
    Py_XDECREF(types);
    Py_XDECREF(headers);
    return result;
}

PyDoc_STRVAR(
    fetch_with_metadata_doc,
    "fetch_with_metadata(queue, consume, destroy, message_timestamp, message_headers,\n"
    "                    header_get_all, timeout_ms, max_messages, topic, partition)\n"
    "--\n\n"
    "As fetch, with the records' metadata after the errors: (chunk bytes or None, records, first offset,\n"
    "last offset, errors, ([timestamp ms or None, ...], [timestamp type, ...], [[(header name str,\n"
    "value bytes or None), ...], ...])), timestamp types as Kafka's (-1 none, 0 CreateTime,\n"
    "1 LogAppendTime). The first six arguments are addresses: the rd_kafka_queue_t, the consume and\n"
    "destroy functions bind_events returned, and librdkafka's three metadata functions.");

static PyObject *fetch_with_metadata(PyObject *self, PyObject *args) {
    unsigned long long queue, consume_address, destroy_address, timestamp_address, headers_address,
        get_all_address;
    int timeout_ms, partition;
    Py_ssize_t max_messages, topic_len;
    const char *topic;
    if (!PyArg_ParseTuple(args, "KKKKKKins#i", &queue, &consume_address, &destroy_address, &timestamp_address,
                          &headers_address, &get_all_address, &timeout_ms, &max_messages, &topic, &topic_len,
                          &partition))
        return NULL;
    if (!valid_fetch_arguments(queue && consume_address && destroy_address && timestamp_address &&
                                   headers_address && get_all_address,
                               partition, timeout_ms, max_messages))
        return NULL;
    consume_batch_queue_fn consume = (consume_batch_queue_fn)(uintptr_t)consume_address;
    message_destroy_fn destroy = (message_destroy_fn)(uintptr_t)destroy_address;
    rd_kafka_message_t **messages = PyMem_RawMalloc(sizeof(*messages) * (size_t)max_messages);
    if (messages == NULL) return PyErr_NoMemory();

    fetched_t out = {0};
    int status;
    Py_BEGIN_ALLOW_THREADS
    out.consumed = consume((void *)(uintptr_t)queue, timeout_ms, messages, (size_t)max_messages);
    status = out.consumed > 0 ? pack(messages, out.consumed, topic, (size_t)topic_len, partition, &out) : FETCH_OK;
    Py_END_ALLOW_THREADS

    PyObject *result = NULL;
    if (raised_fetch_failure(&out, status, partition)) {
        out.consumed = out.consumed < 0 ? 0 : out.consumed;
    } else {
        /* The messages are alive until the end: their timestamps and headers are read here. */
        PyObject *errors = errors_of(messages, out.consumed);
        PyObject *metadata = metadata_of(messages, out.consumed, (message_timestamp_fn)(uintptr_t)timestamp_address,
                                         (message_headers_fn)(uintptr_t)headers_address,
                                         (header_get_all_fn)(uintptr_t)get_all_address);
        PyObject *data = out.records ? PyBytes_FromStringAndSize((const char *)out.data, (Py_ssize_t)out.size)
                                     : Py_NewRef(Py_None);
        if (errors != NULL && metadata != NULL && data != NULL)
            result = Py_BuildValue("(OnLLOO)", data, (Py_ssize_t)out.records, (long long)out.first,
                                   (long long)out.last, errors, metadata);
        Py_XDECREF(errors);
        Py_XDECREF(metadata);
        Py_XDECREF(data);
    }
    free(out.data);
    /* librdkafka moved the partition's position when it handed the messages out; destroying
     * them only frees them. */
    for (Py_ssize_t i = 0; i < out.consumed; i++) destroy(messages[i]);
    PyMem_RawFree(messages);
    return result;
}

static PyMethodDef methods[] = {
    {"bind_events", bind_events, METH_VARARGS, bind_events_doc},
    {"fetch", fetch, METH_VARARGS, fetch_doc},
    {"fetch_columns", fetch_columns, METH_VARARGS, fetch_columns_doc},
    {"fetch_with_metadata", fetch_with_metadata, METH_VARARGS, fetch_with_metadata_doc},
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
