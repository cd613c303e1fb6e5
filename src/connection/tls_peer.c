/*
 * tls_peer.c - a TLS connection as the app's env sees it: its protocol and
 * cipher, and its client's certificate (tls_peer.h, docs/tls.md).
 *
 * The table of client-certificate records: one anonymous shared mapping,
 * made by the master before it forks (so every process has it at the same
 * address), only with --ssl-verify-client: a bitmap of the records in use,
 * then the records, a page each, touched only once used (the lowest free
 * one is taken, so the pages touched are about the most connections with a
 * certificate open at once).  A record is claimed (one compare-and-swap on
 * the bitmap) and written by the worker that did the handshake, before the
 * connection's state, which names it, goes anywhere; after that it is only
 * read, by whichever process serves the connection, as many at once as the
 * slot protocol allows (one); the process that closes the connection lets
 * it go.  A record carries the connection's tls_id, checked on every read
 * and release, so that a stale index never shows another client's
 * certificate.  A record whose connection ended without its release (a
 * worker that crashed, a path that closes without it) would stay in use: a
 * table found full is swept once, against the kernel's list of TCP sockets
 * (a record remembers its socket's inode), before a handshake is refused.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "connection/tls_peer.h"

#include <errno.h>
#include <gnutls/x509.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>

#include "log/log.h"

/* The values a record keeps, in this order, under mod_ssl's names. */
enum peer_field {
    FIELD_VERIFY,
    FIELD_S_DN,
    FIELD_I_DN,
    FIELD_SERIAL,
    FIELD_VERSION,
    FIELD_V_START,
    FIELD_V_END,
    FIELD_FINGERPRINT,
    FIELD_CERT, /* last: left out when the rest leaves it no room */
    FIELD_COUNT
};
static const char *const field_names[FIELD_COUNT] = {
    "SSL_CLIENT_VERIFY", "SSL_CLIENT_S_DN",   "SSL_CLIENT_I_DN",
    "SSL_CLIENT_M_SERIAL", "SSL_CLIENT_M_VERSION", "SSL_CLIENT_V_START",
    "SSL_CLIENT_V_END",  "SSL_CLIENT_FINGERPRINT", "SSL_CLIENT_CERT",
};

#define RECORD_SIZE 4096
struct peer_record {
    _Atomic uint64_t owner; /* the connection's tls_id; 0: being written */
    uint64_t inode;         /* its socket's, for the sweep */
    int64_t not_after;      /* for SSL_CLIENT_V_REMAIN */
    uint16_t len[FIELD_COUNT];
    char text[RECORD_SIZE - 24 - 2 * FIELD_COUNT]; /* the values, one after another */
};
_Static_assert(sizeof(struct peer_record) == RECORD_SIZE, "a record is a page");

/* The most records: the index is 16 bits in the state (1 + index, 0: none). */
#define RECORDS_MAX 65535

static enum serow_verify_client mode;
static _Atomic uint64_t *in_use; /* the bitmap, at the start of the mapping */
static struct peer_record *records;
static unsigned long record_count;

static int refuse(char *err, size_t err_size, const char *format, const char *a, const char *b)
{
    snprintf(err, err_size, format, a, b);
    return -1;
}

/* 0 when crl_file holds CRLs (PEM), each signed by a CA of ca_file: GnuTLS
 * would take one of another CA and never use it. */
static int crls_signed_by(const char *crl_file, const char *ca_file)
{
    gnutls_datum_t crl_pem = {NULL, 0}, ca_pem = {NULL, 0};
    gnutls_x509_crl_t *crls = NULL;
    gnutls_x509_crt_t *cas = NULL;
    unsigned crl_count = 0, ca_count = 0;
    int rc = -1;
    if (gnutls_load_file(crl_file, &crl_pem) < 0 || gnutls_load_file(ca_file, &ca_pem) < 0 ||
        gnutls_x509_crl_list_import2(&crls, &crl_count, &crl_pem, GNUTLS_X509_FMT_PEM, 0) < 0 ||
        gnutls_x509_crt_list_import2(&cas, &ca_count, &ca_pem, GNUTLS_X509_FMT_PEM, 0) < 0)
        goto out;
    rc = crl_count > 0 ? 0 : -1;
    for (unsigned i = 0; i < crl_count; i++) {
        unsigned status = 0;
        if (gnutls_x509_crl_verify(crls[i], cas, ca_count, 0, &status) < 0 || status != 0)
            rc = -1;
    }
out:
    for (unsigned i = 0; i < crl_count; i++)
        gnutls_x509_crl_deinit(crls[i]);
    for (unsigned i = 0; i < ca_count; i++)
        gnutls_x509_crt_deinit(cas[i]);
    gnutls_free(crls);
    gnutls_free(cas);
    gnutls_free(crl_pem.data);
    gnutls_free(ca_pem.data);
    return rc;
}

/* The files named at the last serow_tls_peer_configure, read again into
 * each set of credentials serow_tls_peer_trust is given (at start, and for
 * the credentials a HUP reads). */
static char *ca_path, *crl_path;

static int replace_path(char **path, const char *given)
{
    char *copy = given ? strdup(given) : NULL;
    if (given && copy == NULL)
        return -1;
    free(*path);
    *path = copy;
    return 0;
}

int serow_tls_peer_configure(const char *given, const char *ca_file, const char *crl_file,
                             unsigned long max_connections, char *err, size_t err_size)
{
    static const char *const modes[] = {"off", "on", "optional", "optional_no_ca"};
    int m = -1;
    for (int i = 0; i < 4; i++)
        if (given && strcmp(given, modes[i]) == 0)
            m = i;
    if (m < 0)
        return refuse(err, err_size, "--ssl-verify-client: '%s' is not off, on, optional or "
                      "optional_no_ca%s", given ? given : "", "");
    if (m == SEROW_VERIFY_CLIENT_OFF)
        return 0;
    if (ca_file == NULL && m != SEROW_VERIFY_CLIENT_OPTIONAL_NO_CA)
        return refuse(err, err_size, "--ssl-verify-client: %s needs --ssl-client-ca%s", given, "");
    if (crl_file != NULL && (ca_file == NULL || crls_signed_by(crl_file, ca_file) < 0))
        return refuse(err, err_size, "--ssl-crl: %s holds no PEM CRL, or one that no CA of "
                      "--ssl-client-ca signed (it would revoke nothing)%s", crl_file, "");
    if (replace_path(&ca_path, ca_file) < 0 || replace_path(&crl_path, crl_file) < 0)
        return refuse(err, err_size, "--ssl-verify-client: out of memory%s%s", "", "");
    if (records == NULL) {
        unsigned long n = max_connections + max_connections / 8 + 64;
        if (n > RECORDS_MAX)
            n = RECORDS_MAX;
        /* (tests only: a table small enough to fill) */
        const char *test = getenv("SEROW_TEST_TLS_PEER_RECORDS");
        if (test != NULL && strtoul(test, NULL, 10) > 0 && strtoul(test, NULL, 10) < n)
            n = strtoul(test, NULL, 10);
        size_t bitmap = ((n + 63) / 64 * 8 + RECORD_SIZE - 1) / RECORD_SIZE * RECORD_SIZE;
        void *map = mmap(NULL, bitmap + n * RECORD_SIZE, PROT_READ | PROT_WRITE,
                         MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (map == MAP_FAILED)
            return refuse(err, err_size, "--ssl-verify-client: no memory for the table of client "
                          "certificates (%s)%s", strerror(errno), "");
        in_use = map;
        records = (struct peer_record *)((char *)map + bitmap);
        record_count = n;
    }
    mode = (enum serow_verify_client)m;
    return 0;
}

int serow_tls_peer_trust(gnutls_certificate_credentials_t credentials, char *err, size_t err_size)
{
    if (mode == SEROW_VERIFY_CLIENT_OFF)
        return 0;
    if (ca_path != NULL) {
        int r = gnutls_certificate_set_x509_trust_file(credentials, ca_path, GNUTLS_X509_FMT_PEM);
        if (r <= 0)
            return refuse(err, err_size, "--ssl-client-ca: %s holds no PEM certificate (%s)",
                          ca_path, r < 0 ? gnutls_strerror(r) : "none found");
    }
    if (crl_path != NULL) {
        int r = gnutls_certificate_set_x509_crl_file(credentials, crl_path, GNUTLS_X509_FMT_PEM);
        if (r <= 0)
            return refuse(err, err_size, "--ssl-crl: %s cannot be used (%s)", crl_path,
                          r < 0 ? gnutls_strerror(r) : "no CRL");
    }
    return 0;
}

/* A certificate is checked for what a client's is for too (an extended
 * key usage, when it has one, that says TLS client), as OpenSSL's server
 * checks it. */
static gnutls_typed_vdata_st client_purpose = {GNUTLS_DT_KEY_PURPOSE_OID,
                                               (unsigned char *)GNUTLS_KP_TLS_WWW_CLIENT, 0};

/* The handshake's check (on, optional): a certificate sent must pass, and
 * none is the mode's business (GnuTLS's own check, set with
 * gnutls_session_set_verify_cert, would refuse none for optional). */
static int check_in_handshake(gnutls_session_t session)
{
    unsigned count = 0, status = 0;
    if (gnutls_certificate_get_peers(session, &count) == NULL || count == 0)
        return 0;
    if (gnutls_certificate_verify_peers(session, &client_purpose, 1, &status) < 0 || status != 0)
        return GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR;
    return 0;
}

void serow_tls_peer_ask(gnutls_session_t session)
{
    switch (mode) {
    case SEROW_VERIFY_CLIENT_OFF:
        gnutls_certificate_server_set_request(session, GNUTLS_CERT_IGNORE);
        break;
    case SEROW_VERIFY_CLIENT_ON:
        gnutls_certificate_server_set_request(session, GNUTLS_CERT_REQUIRE);
        gnutls_session_set_verify_function(session, check_in_handshake);
        break;
    case SEROW_VERIFY_CLIENT_OPTIONAL:
        gnutls_certificate_server_set_request(session, GNUTLS_CERT_REQUEST);
        gnutls_session_set_verify_function(session, check_in_handshake);
        break;
    case SEROW_VERIFY_CLIENT_OPTIONAL_NO_CA:
        gnutls_certificate_server_set_request(session, GNUTLS_CERT_REQUEST);
        break;
    }
}

/* ---- the table ------------------------------------------------------------ */

static long claim(void)
{
    for (unsigned long w = 0; w * 64 < record_count; w++) {
        uint64_t bits = atomic_load(&in_use[w]);
        while (bits != UINT64_MAX) {
            int b = __builtin_ctzll(~bits);
            unsigned long i = w * 64 + (unsigned long)b;
            if (i >= record_count)
                break;
            if (atomic_compare_exchange_weak(&in_use[w], &bits, bits | (1ULL << b)))
                return (long)i;
        }
    }
    return -1;
}

static void let_go(unsigned long i)
{
    atomic_fetch_and(&in_use[i / 64], ~(1ULL << (i % 64)));
}

static int inode_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The inodes of this network namespace's TCP sockets, sorted (the tenth
 * column of /proc/net/tcp and tcp6); *n of them.  NULL when unreadable. */
static uint64_t *tcp_inodes(size_t *n)
{
    static const char *const files[] = {"/proc/net/tcp", "/proc/net/tcp6"};
    uint64_t *all = NULL;
    size_t count = 0, size = 0;
    int read_one = 0;
    for (int f = 0; f < 2; f++) {
        FILE *in = fopen(files[f], "r");
        if (in == NULL)
            continue;
        read_one = 1;
        char line[512];
        while (fgets(line, sizeof line, in)) {
            unsigned long long inode;
            if (sscanf(line, "%*s %*s %*s %*s %*s %*s %*s %*s %*s %llu", &inode) != 1 || inode == 0)
                continue;
            if (count == size) {
                size = size ? size * 2 : 1024;
                uint64_t *grown = realloc(all, size * sizeof *all);
                if (grown == NULL) {
                    fclose(in);
                    free(all);
                    return NULL;
                }
                all = grown;
            }
            all[count++] = inode;
        }
        fclose(in);
    }
    if (!read_one)
        return NULL;
    qsort(all, count, sizeof *all, inode_cmp);
    *n = count;
    return all ? all : malloc(1);
}

/* Lets go the records whose socket is gone.  How many. */
static unsigned long sweep(void)
{
    size_t n = 0;
    uint64_t *live = tcp_inodes(&n);
    if (live == NULL)
        return 0;
    unsigned long freed = 0;
    for (unsigned long i = 0; i < record_count; i++) {
        struct peer_record *r = &records[i];
        if (!(atomic_load(&in_use[i / 64]) & (1ULL << (i % 64))))
            continue;
        uint64_t owner = atomic_load(&r->owner);
        if (owner == 0 || r->inode == 0 || bsearch(&r->inode, live, n, sizeof *live, inode_cmp))
            continue; /* (being written, or its socket lives) */
        if (atomic_compare_exchange_strong(&r->owner, &owner, 0)) {
            let_go(i);
            freed++;
        }
    }
    free(live);
    if (freed)
        serow_log_info("TLS: %lu record(s) of client certificates whose connections ended without "
                       "letting them go (a process that died?) swept from the full table", freed);
    return freed;
}

static struct peer_record *record_of(const struct serow_connection_state *cs)
{
    if (cs->tls_peer == 0 || records == NULL || cs->tls_peer > record_count)
        return NULL;
    struct peer_record *r = &records[cs->tls_peer - 1];
    return atomic_load_explicit(&r->owner, memory_order_acquire) == cs->tls_id ? r : NULL;
}

void serow_transport_closed_tls(const struct serow_connection_state *cs)
{
    struct peer_record *r = record_of(cs);
    uint64_t owner = cs->tls_id;
    if (r != NULL && atomic_compare_exchange_strong(&r->owner, &owner, 0))
        let_go((unsigned long)(r - records));
}

/* ---- writing a record ----------------------------------------------------- */

/* The value of a field, appended to the record; -1 when it has no room. */
static int put(struct peer_record *r, size_t *used, enum peer_field f, const char *value,
               size_t len)
{
    if (len > sizeof r->text - *used || len > UINT16_MAX)
        return -1;
    memcpy(r->text + *used, value, len);
    r->len[f] = (uint16_t)len;
    *used += len;
    return 0;
}

/* A name (the subject's or the issuer's) in RFC 4514's form, as GnuTLS
 * writes it (the last RDN first, values escaped as the RFC says, UTF-8 left
 * as it is), with OpenSSL's short names where the two differ, so that a
 * name reads as mod_ssl's SSL_CLIENT_S_DN and nginx's $ssl_client_s_dn. */
static int put_dn(struct peer_record *r, size_t *used, enum peer_field f, gnutls_x509_crt_t crt)
{
    static const struct {
        const char *gnutls, *openssl;
    } renamed[] = {{"EMAIL=", "emailAddress="}, {"surName=", "SN="}, {"givenName=", "GN="}};
    gnutls_datum_t dn = {NULL, 0};
    int rc = f == FIELD_S_DN ? gnutls_x509_crt_get_dn3(crt, &dn, 0)
                             : gnutls_x509_crt_get_issuer_dn3(crt, &dn, 0);
    if (rc < 0)
        return put(r, used, f, "", 0);
    char *out = r->text + *used;
    size_t room = sizeof r->text - *used, n = 0;
    const char *s = (const char *)dn.data, *end = s + dn.size;
    int at_type = 1; /* at the start of an attribute's type */
    rc = 0;
    while (s < end && rc == 0) {
        const char *part = s;
        size_t len = 1;
        if (at_type) {
            for (size_t k = 0; k < sizeof renamed / sizeof renamed[0]; k++) {
                size_t g = strlen(renamed[k].gnutls);
                if ((size_t)(end - s) >= g && memcmp(s, renamed[k].gnutls, g) == 0) {
                    s += g - 1;
                    part = renamed[k].openssl;
                    len = strlen(part);
                    break;
                }
            }
            at_type = 0;
        } else if (*s == '\\' && s + 1 < end) {
            len = 2; /* an escaped character, never a separator */
            s++;
        } else if (*s == ',' || *s == '+') {
            at_type = 1;
        }
        s++;
        if (len > room - n)
            rc = -1;
        else
            memcpy(out + n, part, len), n += len;
    }
    gnutls_free(dn.data);
    if (rc < 0)
        return -1;
    r->len[f] = (uint16_t)n;
    *used += n;
    return 0;
}

/* OpenSSL's words for why a certificate failed its check (what mod_ssl and
 * nginx put after "FAILED:"), for the usual reasons; GnuTLS's otherwise. */
static void put_verify(struct peer_record *r, size_t *used, unsigned status, gnutls_x509_crt_t crt)
{
    static const struct {
        unsigned bit;
        const char *words;
    } reasons[] = {
        {GNUTLS_CERT_SIGNER_NOT_FOUND, "unable to get local issuer certificate"},
        {GNUTLS_CERT_SIGNATURE_FAILURE, "certificate signature failure"},
        {GNUTLS_CERT_SIGNER_NOT_CA, "invalid CA certificate"},
        {GNUTLS_CERT_REVOKED, "certificate revoked"},
        {GNUTLS_CERT_NOT_ACTIVATED, "certificate is not yet valid"},
        {GNUTLS_CERT_EXPIRED, "certificate has expired"},
        {GNUTLS_CERT_PURPOSE_MISMATCH, "unsupported certificate purpose"},
    };
    char text[256];
    if (status == 0) {
        put(r, used, FIELD_VERIFY, "SUCCESS", 7);
        return;
    }
    const char *why = NULL;
    for (size_t k = 0; k < sizeof reasons / sizeof reasons[0] && why == NULL; k++)
        if (status & reasons[k].bit)
            why = reasons[k].words;
    if (why == reasons[0].words && gnutls_x509_crt_check_issuer(crt, crt))
        why = "self-signed certificate";
    gnutls_datum_t printed = {NULL, 0};
    if (why == NULL && gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509,
                                                                    &printed, 0) == 0)
        why = (const char *)printed.data;
    int n = snprintf(text, sizeof text, "FAILED:%s", why ? why : "unknown");
    gnutls_free(printed.data);
    put(r, used, FIELD_VERIFY, text, n < (int)sizeof text ? (size_t)n : sizeof text - 1);
}

/* A time as mod_ssl and nginx write it (OpenSSL's ASN1_TIME_print): "Nov  5
 * 09:03:00 2026 GMT", in English whatever the locale. */
static size_t format_time(time_t t, char *out, size_t room)
{
    static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    struct tm tm;
    if (gmtime_r(&t, &tm) == NULL)
        return 0;
    int n = snprintf(out, room, "%s %2d %02d:%02d:%02d %d GMT", months[tm.tm_mon], tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec, tm.tm_year + 1900);
    return n > 0 && (size_t)n < room ? (size_t)n : 0;
}

static int put_hex(struct peer_record *r, size_t *used, enum peer_field f, const uint8_t *bytes,
                   size_t len, const char *digits)
{
    char text[128];
    if (len * 2 > sizeof text)
        len = sizeof text / 2;
    for (size_t i = 0; i < len; i++) {
        text[2 * i] = digits[bytes[i] >> 4];
        text[2 * i + 1] = digits[bytes[i] & 15];
    }
    return put(r, used, f, text, 2 * len);
}

/* The record of the certificate crt, whose check said status. */
static int fill(struct peer_record *r, gnutls_x509_crt_t crt, unsigned status)
{
    size_t used = 0;
    char text[64];
    memset(r->len, 0, sizeof r->len);
    put_verify(r, &used, status, crt);
    if (put_dn(r, &used, FIELD_S_DN, crt) < 0 || put_dn(r, &used, FIELD_I_DN, crt) < 0)
        return -1;
    /* The serial as OpenSSL prints it (nginx's $ssl_client_serial): upper
     * case hex, without the sign's leading zero bytes. */
    uint8_t serial[64];
    size_t serial_len = sizeof serial, skip = 0;
    if (gnutls_x509_crt_get_serial(crt, serial, &serial_len) == 0) {
        while (skip + 1 < serial_len && serial[skip] == 0)
            skip++;
        put_hex(r, &used, FIELD_SERIAL, serial + skip, serial_len - skip, "0123456789ABCDEF");
    }
    int n = snprintf(text, sizeof text, "%d", gnutls_x509_crt_get_version(crt));
    put(r, &used, FIELD_VERSION, text, (size_t)n);
    time_t start = gnutls_x509_crt_get_activation_time(crt);
    time_t end = gnutls_x509_crt_get_expiration_time(crt);
    put(r, &used, FIELD_V_START, text, format_time(start, text, sizeof text));
    put(r, &used, FIELD_V_END, text, format_time(end, text, sizeof text));
    r->not_after = (int64_t)end;
    /* nginx's $ssl_client_fingerprint: SHA-1, lower case hex */
    uint8_t digest[20];
    size_t digest_len = sizeof digest;
    if (gnutls_x509_crt_get_fingerprint(crt, GNUTLS_DIG_SHA1, digest, &digest_len) == 0)
        put_hex(r, &used, FIELD_FINGERPRINT, digest, digest_len, "0123456789abcdef");
    gnutls_datum_t pem = {NULL, 0};
    if (gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &pem) == 0 &&
        put(r, &used, FIELD_CERT, (const char *)pem.data, pem.size) < 0)
        serow_log_debug("TLS: a client's certificate (%u bytes in PEM) is too long for "
                        "SSL_CLIENT_CERT, left out", pem.size);
    gnutls_free(pem.data);
    return 0;
}

/* The suites, numbered for serow_connection_state.tls_suite: TLS 1.3's,
 * then TLS 1.2's with an ECDSA certificate, then with an RSA one, each in
 * the order of enum serow_tls_cipher; by OpenSSL's names (mod_ssl's
 * SSL_CIPHER, nginx's $ssl_cipher). */
static const char *const suite_names[] = {
    NULL,
    "TLS_AES_128_GCM_SHA256",        "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",  "ECDHE-ECDSA-AES128-GCM-SHA256",
    "ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-ECDSA-CHACHA20-POLY1305",
    "ECDHE-RSA-AES128-GCM-SHA256",   "ECDHE-RSA-AES256-GCM-SHA384",
    "ECDHE-RSA-CHACHA20-POLY1305",
};

static uint8_t suite_of(gnutls_session_t session, const struct serow_tls_state *st)
{
    int cipher = st->cipher == SEROW_TLS_AES_128_GCM   ? 0
                 : st->cipher == SEROW_TLS_AES_256_GCM ? 1
                                                       : 2;
    if (st->version == SEROW_TLS_1_3)
        return (uint8_t)(1 + cipher);
    return (uint8_t)((gnutls_kx_get(session) == GNUTLS_KX_ECDHE_RSA ? 7 : 4) + cipher);
}

int serow_tls_peer_record(gnutls_session_t session, struct serow_connection_state *cs, int fd,
                          const char **why, gnutls_alert_description_t *alert)
{
    cs->tls_suite = suite_of(session, &cs->tls);
    cs->tls_peer = 0;
    if (mode == SEROW_VERIFY_CLIENT_OFF)
        return 0;
    unsigned count = 0;
    const gnutls_datum_t *chain = gnutls_certificate_get_peers(session, &count);
    *alert = cs->tls.version == SEROW_TLS_1_3 ? GNUTLS_A_CERTIFICATE_REQUIRED
                                              : GNUTLS_A_HANDSHAKE_FAILURE;
    if (chain == NULL || count == 0) {
        *why = "the client sent no certificate";
        return mode == SEROW_VERIFY_CLIENT_ON ? -1 : 0;
    }
    /* Checked again here, for every mode: the handshake's own check (on,
     * optional) ends it at once with the right alert, and a session
     * resumed from a ticket brings its certificate without one. */
    unsigned status = 0;
    if (gnutls_certificate_verify_peers(session, &client_purpose, 1, &status) < 0)
        status = GNUTLS_CERT_INVALID | GNUTLS_CERT_SIGNER_NOT_FOUND;
    *alert = GNUTLS_A_BAD_CERTIFICATE;
    if (status != 0 && mode != SEROW_VERIFY_CLIENT_OPTIONAL_NO_CA) {
        *why = "the client's certificate failed its check";
        return -1;
    }
    gnutls_x509_crt_t crt;
    if (gnutls_x509_crt_init(&crt) < 0) {
        *why = "out of memory";
        *alert = GNUTLS_A_INTERNAL_ERROR;
        return -1;
    }
    int rc = -1;
    long i = -1;
    *alert = GNUTLS_A_INTERNAL_ERROR;
    if (gnutls_x509_crt_import(crt, &chain[0], GNUTLS_X509_FMT_DER) < 0) {
        *why = "the client's certificate cannot be read";
        *alert = GNUTLS_A_BAD_CERTIFICATE;
    } else if ((i = claim()) < 0 && (sweep() == 0 || (i = claim()) < 0)) {
        *why = "no room in the table of client certificates (past --max-keepalive-connections)";
        serow_log_warn("TLS: a handshake refused: %s", *why);
    } else if (fill(&records[i], crt, status) < 0) {
        *why = "the client's certificate's names are too long to keep";
        *alert = GNUTLS_A_BAD_CERTIFICATE;
    } else {
        struct stat st;
        records[i].inode = fstat(fd, &st) == 0 ? (uint64_t)st.st_ino : 0;
        atomic_store_explicit(&records[i].owner, cs->tls_id, memory_order_release);
        cs->tls_peer = (uint16_t)(i + 1);
        rc = 0;
    }
    if (rc < 0 && i >= 0)
        let_go((unsigned long)i);
    gnutls_x509_crt_deinit(crt);
    return rc;
}

/* ---- the env -------------------------------------------------------------- */

static void add(struct serow_tls_var *vars, size_t *n, const char *name, const char *value,
                size_t len)
{
    vars[*n] = (struct serow_tls_var){name, strlen(name), value, len};
    (*n)++;
}

size_t serow_tls_env_vars(const struct serow_connection_state *cs, struct serow_tls_var *vars,
                          char *scratch)
{
    size_t n = 0;
    const char *protocol = cs->tls.version == SEROW_TLS_1_3   ? "TLSv1.3"
                           : cs->tls.version == SEROW_TLS_1_2 ? "TLSv1.2"
                                                              : NULL;
    if (protocol)
        add(vars, &n, "SSL_PROTOCOL", protocol, 7);
    if (cs->tls_suite > 0 && cs->tls_suite < sizeof suite_names / sizeof suite_names[0])
        add(vars, &n, "SSL_CIPHER", suite_names[cs->tls_suite],
            strlen(suite_names[cs->tls_suite]));
    if (mode == SEROW_VERIFY_CLIENT_OFF)
        return n;
    if (cs->tls_peer == 0) {
        add(vars, &n, "SSL_CLIENT_VERIFY", "NONE", 4);
        return n;
    }
    const struct peer_record *r = record_of(cs);
    if (r == NULL) {
        /* (never: a record is let go only when its connection ends) */
        serow_log_error("TLS: the record of a connection's client certificate is lost");
        add(vars, &n, "SSL_CLIENT_VERIFY", "FAILED:the certificate's record is lost", 39);
        return n;
    }
    size_t at = 0;
    for (int f = 0; f < FIELD_COUNT; f++) {
        if (r->len[f] || f == FIELD_S_DN || f == FIELD_I_DN)
            add(vars, &n, field_names[f], r->text + at, r->len[f]);
        at += r->len[f];
    }
    /* days left, as mod_ssl's SSL_CLIENT_V_REMAIN (0 once expired) */
    int64_t left = (r->not_after - (int64_t)time(NULL)) / 86400;
    int len = snprintf(scratch, 32, "%lld", (long long)(left > 0 ? left : 0));
    add(vars, &n, "SSL_CLIENT_V_REMAIN", scratch, (size_t)len);
    return n;
}
