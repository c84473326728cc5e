/* The load generator of bench/scenarios/cores.sh in C, so the generator takes less of this 2-core machine than the brokers
 * it loads (the Python one, `bench/scenarios/cores.py load`, costs ~50 us of CPU per record; this one a fraction of it).
 * C librdkafka producers (one thread each, each its own connections), linger.ms=0, acks=all, records of SIZE bytes
 * round-robin over PARTITIONS, each producer keeping WINDOW records outstanding (a record is sent when one is
 * acknowledged). Between the wall-clock times START and END it counts acknowledged records, Produce requests sent
 * (librdkafka's statistics) and its own CPU seconds, and prints them as one JSON line.
 *
 * Built by bench/scenarios/cores.sh against the system librdkafka (Debian's librdkafka1, which kcat uses; no headers
 * needed: the few prototypes are declared below, as librdkafka's ABI is stable):
 *   gcc -O2 -o .cache/bench/cores_load bench/scenarios/cores_load.c /usr/lib/x86_64-linux-gnu/librdkafka.so.1 -lpthread
 *   cores_load BOOTSTRAP TOPIC PARTITIONS CLIENTS WINDOW SIZE SEED START END
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

typedef struct rd_kafka_s rd_kafka_t;
typedef struct rd_kafka_conf_s rd_kafka_conf_t;
typedef struct rd_kafka_topic_s rd_kafka_topic_t;
typedef struct rd_kafka_message_s {
    int err;
    rd_kafka_topic_t *rkt;
    int32_t partition;
    void *payload;
    size_t len;
    void *key;
    size_t key_len;
    int64_t offset;
    void *_private;
} rd_kafka_message_t;

extern rd_kafka_conf_t *rd_kafka_conf_new(void);
extern int rd_kafka_conf_set(rd_kafka_conf_t *, const char *, const char *, char *, size_t);
extern void rd_kafka_conf_set_dr_msg_cb(rd_kafka_conf_t *,
                                        void (*)(rd_kafka_t *, const rd_kafka_message_t *, void *));
extern void rd_kafka_conf_set_stats_cb(rd_kafka_conf_t *, int (*)(rd_kafka_t *, char *, size_t, void *));
extern void rd_kafka_conf_set_opaque(rd_kafka_conf_t *, void *);
extern rd_kafka_t *rd_kafka_new(int, rd_kafka_conf_t *, char *, size_t);
extern rd_kafka_topic_t *rd_kafka_topic_new(rd_kafka_t *, const char *, void *);
extern int rd_kafka_produce(rd_kafka_topic_t *, int32_t, int, void *, size_t, const void *, size_t, void *);
extern int rd_kafka_poll(rd_kafka_t *, int);
extern int rd_kafka_flush(rd_kafka_t *, int);
extern void rd_kafka_topic_destroy(rd_kafka_topic_t *);
extern void rd_kafka_destroy(rd_kafka_t *);

#define RD_KAFKA_PRODUCER 0
#define RD_KAFKA_MSG_F_COPY 0x2

typedef struct {
    int index;
    long outstanding;
    volatile long acked, errors, requests;
} client_t;

static const char *bootstrap, *topic;
static int partitions, clients, window, size, seed;
static volatile int stop;
static char *payload;

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    client_t *c = opaque;
    c->outstanding--;
    if (m->err == 0)
        c->acked++;
    else
        c->errors++;
}

/* librdkafka's statistics JSON: sum of every broker's "req":{"Produce":N,...} */
static int on_stats(rd_kafka_t *rk, char *json, size_t len, void *opaque) {
    client_t *c = opaque;
    long sum = 0;
    for (char *p = json; (p = strstr(p, "\"Produce\":")) != NULL; p += 10) sum += atol(p + 10);
    c->requests = sum;
    return 0;
}

static void *run_client(void *arg) {
    client_t *c = arg;
    char err[512], id[64];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    snprintf(id, sizeof id, "cores-c-%d-%d", (int)getpid(), c->index);
    const char *kv[][2] = {{"bootstrap.servers", bootstrap}, {"linger.ms", "0"}, {"acks", "all"},
                           {"client.id", id}, {"message.timeout.ms", "60000"}, {"statistics.interval.ms", "1000"},
                           {"log_level", "0"}};
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
        if (rd_kafka_conf_set(conf, kv[i][0], kv[i][1], err, sizeof err) != 0) {
            fprintf(stderr, "%s: %s\n", kv[i][0], err);
            exit(2);
        }
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_conf_set_stats_cb(conf, on_stats);
    rd_kafka_conf_set_opaque(conf, c);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "rd_kafka_new: %s\n", err);
        exit(2);
    }
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    long n = c->index * 7 + seed;
    while (!stop) {
        while (c->outstanding < window) {
            if (rd_kafka_produce(rkt, (int32_t)(n % partitions), RD_KAFKA_MSG_F_COPY, payload, size, NULL, 0,
                                 NULL) != 0)
                break;
            n++;
            c->outstanding++;
        }
        rd_kafka_poll(rk, 50);
    }
    rd_kafka_flush(rk, 30000);
    rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(rk);
    return NULL;
}

static double now(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return tv.tv_sec + tv.tv_usec / 1e6;
}

static void sleep_until(double t) {
    double left;
    while ((left = t - now()) > 0) usleep(left > 0.5 ? 500000 : (useconds_t)(left * 1e6));
}

static double cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static void totals(client_t *cs, long *acked, long *errors, long *requests) {
    *acked = *errors = *requests = 0;
    for (int i = 0; i < clients; i++) {
        *acked += cs[i].acked;
        *errors += cs[i].errors;
        *requests += cs[i].requests;
    }
}

int main(int argc, char **argv) {
    if (argc != 10) {
        fprintf(stderr, "usage: %s BOOTSTRAP TOPIC PARTITIONS CLIENTS WINDOW SIZE SEED START END\n", argv[0]);
        return 2;
    }
    bootstrap = argv[1];
    topic = argv[2];
    partitions = atoi(argv[3]);
    clients = atoi(argv[4]);
    window = atoi(argv[5]);
    size = atoi(argv[6]);
    seed = atoi(argv[7]);
    double start = atof(argv[8]), end = atof(argv[9]);
    payload = malloc(size);
    srand(seed + 1);
    for (int i = 0; i < size; i++) payload[i] = (char)rand();
    client_t *cs = calloc(clients, sizeof *cs);
    pthread_t *th = calloc(clients, sizeof *th);
    for (int i = 0; i < clients; i++) {
        cs[i].index = i;
        pthread_create(&th[i], NULL, run_client, &cs[i]);
    }
    long a0, e0, q0, a1, e1, q1, all_acked, all_errors, all_requests;
    sleep_until(start);
    totals(cs, &a0, &e0, &q0);
    double c0 = cpu_s();
    sleep_until(end);
    totals(cs, &a1, &e1, &q1);
    double c1 = cpu_s();
    stop = 1;
    for (int i = 0; i < clients; i++) pthread_join(th[i], NULL);
    totals(cs, &all_acked, &all_errors, &all_requests); /* errors: the whole run, flush included */
    printf("{\"acked\": %ld, \"errors\": %ld, \"produce_requests\": %ld, \"cpu_s\": %.3f}\n", a1 - a0,
           all_errors, q1 - q0, c1 - c0);
    return 0;
}
