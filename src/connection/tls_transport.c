/*
 * tls_transport.c - TLS as a transport (tls_transport.h): the server's
 * credentials, the handshake, and records read and written through the
 * record layer (tls_record.c) from the state in serow_connection_state.
 *
 * Owns: the credentials, priorities and ticket key of the process, and per
 * process a table by descriptor of what it keeps beside a TLS connection
 * it owns (struct tls_local).  It knows no loop: what a caller does with
 * EAGAIN or a short count is the caller's.
 *
 * The rule that lets a connection move: it moves only between requests,
 * when nothing of it is in this process but its state.  What a process
 * may keep beside it meanwhile, each a case its callers see:
 *  - the start of a record still arriving (it is read from the socket, not
 *    left there: a kernel whose receive buffer is full sends no more until
 *    it is read), and the rest of a record whose plaintext was longer than
 *    the room of the read that opened it: serow_transport_buffered says so,
 *    and a worker does not park such a connection (its next request has
 *    begun);
 *  - sealed bytes the socket did not take: the caller is told that the
 *    last byte it gave is not sent yet, so that it waits for the socket and
 *    calls again, with that byte first, and gets its count once all went (a
 *    short write never cuts a record and never loses one); a worker parks a
 *    connection only after its response went.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "connection/tls_transport.h"

#include <errno.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "connection/tls_peer.h"
#include "log/log.h"

/* ---- the credentials, set before the forks --------------------------------- */

/* Set in the master at start and again on each HUP (serow_tls_configure),
 * before it forks: every process forked after a call has that call's.
 * credentials holds every pair, in the order given: GnuTLS gives a client
 * the first whose key its signature algorithms allow. */
static gnutls_certificate_credentials_t credentials;
static gnutls_priority_t priorities;
/* The session tickets' master key (64 bytes, gnutls_session_ticket_key_generate),
 * made once in the master and inherited by every process: GnuTLS derives
 * the key that seals tickets from it and the time (it changes every three
 * ticket lifetimes, and the one before is still accepted), so every worker
 * seals and opens tickets with the same key, and a client resumes on any
 * of them.  Kept across HUP (docs/tls.md says why); never written
 * anywhere.  Empty: tickets off. */
static gnutls_datum_t ticket_key;

/* SNI: each name the certificates carry (their DNS names, or the common
 * name of one that has none; lower case; "*.example.com" as written), with
 * the credentials of the pairs that carry it, in the order given.  A client
 * that names a host gets those credentials (GnuTLS then picks among them
 * by the client's signature algorithms: an ECDSA and an RSA certificate of
 * one name); one that names no host, or none of these, gets all the pairs,
 * so the first.  GnuTLS's own choice by name (an exact, case-sensitive
 * match) knows no wildcards.  Empty when there is one pair. */
struct sni_name {
    char *name;
    gnutls_certificate_credentials_t creds; /* one of groups, or credentials */
};
struct sni_state {
    struct sni_name *names;
    size_t n_names;
    gnutls_certificate_credentials_t *groups; /* owned: one per set of pairs */
    size_t n_groups;
};
static struct sni_state sni;

static int refuse(char *err, size_t err_size, const char *format, const char *a, const char *b)
{
    snprintf(err, err_size, format, a, b);
    return -1;
}

/* Whether every cipher and version the priorities allow is one the record
 * layer has: a session it could not export would end after its handshake. */
static int check_priorities(gnutls_priority_t p, const char *given, char *err, size_t err_size)
{
    const unsigned int *list;
    int n = gnutls_priority_cipher_list(p, &list);
    for (int i = 0; i < n; i++)
        if (list[i] != GNUTLS_CIPHER_AES_128_GCM && list[i] != GNUTLS_CIPHER_AES_256_GCM &&
            list[i] != GNUTLS_CIPHER_CHACHA20_POLY1305)
            return refuse(err, err_size,
                          "--ssl-priorities: '%s' allows the cipher %s; Serow's record layer "
                          "has AES-128-GCM, AES-256-GCM and CHACHA20-POLY1305 only",
                          given, gnutls_cipher_get_name(list[i]));
    n = gnutls_priority_protocol_list(p, &list);
    for (int i = 0; i < n; i++)
        if (list[i] != GNUTLS_TLS1_2 && list[i] != GNUTLS_TLS1_3)
            return refuse(err, err_size,
                          "--ssl-priorities: '%s' allows %s; TLS 1.2 is the oldest Serow serves",
                          given, gnutls_protocol_get_name(list[i]));
    return 0;
}

/* One --ssl-cert and its --ssl-key, read and checked, and the names its
 * certificate answers to. */
struct pair {
    gnutls_datum_t cert, key;
    char **names;
    size_t n_names;
};

static void pair_clear(struct pair *p)
{
    if (p->key.data) {
        explicit_bzero(p->key.data, p->key.size);
        gnutls_free(p->key.data);
    }
    gnutls_free(p->cert.data);
    for (size_t i = 0; i < p->n_names; i++)
        free(p->names[i]);
    free(p->names);
    memset(p, 0, sizeof *p);
}

/* Host names are compared in lower case (ASCII: an international name is
 * in its ASCII form, xn--..., in a certificate and in SNI alike). */
static void lower_case(char *name)
{
    for (char *c = name; *c; c++)
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c - 'A' + 'a');
}

static int add_name(struct pair *p, const char *name, size_t len)
{
    for (size_t i = 0; i < p->n_names; i++)
        if (strlen(p->names[i]) == len && strncasecmp(p->names[i], name, len) == 0)
            return 0;
    char **grown = realloc(p->names, (p->n_names + 1) * sizeof *grown);
    if (grown == NULL)
        return -1;
    p->names = grown;
    char *copy = strndup(name, len);
    if (copy == NULL)
        return -1;
    lower_case(copy);
    p->names[p->n_names++] = copy;
    return 0;
}

/* The names a client's SNI may ask the certificate by: its DNS names, or
 * its common name when it has none (as GnuTLS and HAProxy take them). */
static int collect_names(struct pair *p, gnutls_x509_crt_t crt)
{
    char name[256];
    int dns = 0;
    for (unsigned seq = 0;; seq++) {
        size_t size = sizeof name;
        int type = gnutls_x509_crt_get_subject_alt_name(crt, seq, name, &size, NULL);
        if (type < 0 && type != GNUTLS_E_SHORT_MEMORY_BUFFER)
            break; /* the end of the list (or a list that cannot be read) */
        if (type == GNUTLS_SAN_DNSNAME) {
            dns = 1;
            if (add_name(p, name, size) < 0)
                return -1;
        }
    }
    size_t size = sizeof name;
    if (!dns && gnutls_x509_crt_get_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, 0, name,
                                              &size) == 0 &&
        add_name(p, name, size) < 0)
        return -1;
    return 0;
}

/* Reads the certificate chain in cert_file and its key in key_file into p.
 * 0, or -1 with what is wrong in err, naming the option and the file. */
static int read_pair(struct pair *p, const char *cert_file, const char *key_file, char *err,
                     size_t err_size)
{
    gnutls_x509_crt_t *chain = NULL;
    unsigned chain_len = 0;
    gnutls_x509_privkey_t private_key = NULL;
    int rc = -1;

    if (gnutls_load_file(cert_file, &p->cert) < 0) {
        refuse(err, err_size, "--ssl-cert: cannot read %s%s", cert_file, "");
        goto out;
    }
    if (gnutls_load_file(key_file, &p->key) < 0) {
        refuse(err, err_size, "--ssl-key: cannot read %s%s", key_file, "");
        goto out;
    }
    /* Each file checked on its own, so that the message names the right one. */
    int r = gnutls_x509_crt_list_import2(&chain, &chain_len, &p->cert, GNUTLS_X509_FMT_PEM, 0);
    if (r < 0) {
        refuse(err, err_size, "--ssl-cert: %s holds no PEM certificate (%s)", cert_file,
               gnutls_strerror(r));
        goto out;
    }
    if ((r = gnutls_x509_privkey_init(&private_key)) < 0 ||
        (r = gnutls_x509_privkey_import2(private_key, &p->key, GNUTLS_X509_FMT_PEM, NULL, 0)) < 0) {
        refuse(err, err_size, "--ssl-key: %s holds no PEM private key without a passphrase (%s)",
               key_file, gnutls_strerror(r));
        goto out;
    }
    if (collect_names(p, chain[0]) < 0) {
        refuse(err, err_size, "--ssl-cert: %s: out of memory%s", cert_file, "");
        goto out;
    }
    rc = 0;
out:
    for (unsigned i = 0; i < chain_len; i++)
        gnutls_x509_crt_deinit(chain[i]);
    gnutls_free(chain);
    if (private_key)
        gnutls_x509_privkey_deinit(private_key);
    return rc;
}

static int set_pair(gnutls_certificate_credentials_t creds, const struct pair *p,
                    const char *cert_file, const char *key_file, char *err, size_t err_size)
{
    int r = gnutls_certificate_set_x509_key_mem2(creds, &p->cert, &p->key, GNUTLS_X509_FMT_PEM,
                                                 NULL, 0);
    if (r == GNUTLS_E_CERTIFICATE_KEY_MISMATCH)
        return refuse(err, err_size, "--ssl-key: %s is not the key of the certificate in %s",
                      key_file, cert_file);
    if (r < 0)
        return refuse(err, err_size, "--ssl-cert: %s cannot be used (%s)", cert_file,
                      gnutls_strerror(r));
    return 0;
}

static void sni_clear(struct sni_state *st)
{
    for (size_t i = 0; i < st->n_names; i++)
        free(st->names[i].name);
    free(st->names);
    for (size_t i = 0; i < st->n_groups; i++)
        gnutls_certificate_free_credentials(st->groups[i]);
    free(st->groups);
    memset(st, 0, sizeof *st);
}

static int pair_has(const struct pair *p, const char *name)
{
    for (size_t i = 0; i < p->n_names; i++)
        if (strcmp(p->names[i], name) == 0)
            return 1;
    return 0;
}

/* Builds st from the pairs' names (all of them in all_creds): for each
 * name, the credentials of the pairs that carry it, made once for each set
 * of pairs ("which" says which: '1' or '0' for each pair). */
static int sni_build(struct sni_state *st, struct pair *p, size_t pairs,
                     gnutls_certificate_credentials_t all_creds, const char *const *cert_files,
                     const char *const *key_files, char *err, size_t err_size)
{
    char **which_of = NULL; /* per group, its pairs */
    char *which = malloc(pairs + 1);
    int rc = -1;
    if (which == NULL)
        goto oom;
    for (size_t i = 0; i < pairs; i++)
        for (size_t k = 0; k < p[i].n_names; k++) {
            const char *name = p[i].names[k];
            int seen = 0;
            for (size_t n = 0; n < st->n_names && !seen; n++)
                seen = strcmp(st->names[n].name, name) == 0;
            if (seen)
                continue;
            size_t count = 0;
            for (size_t j = 0; j < pairs; j++) {
                which[j] = pair_has(&p[j], name) ? '1' : '0';
                count += which[j] == '1';
            }
            which[pairs] = '\0';
            gnutls_certificate_credentials_t creds = all_creds;
            if (count < pairs) {
                size_t g = 0;
                while (g < st->n_groups && strcmp(which_of[g], which) != 0)
                    g++;
                if (g == st->n_groups) {
                    gnutls_certificate_credentials_t *grown =
                        realloc(st->groups, (g + 1) * sizeof *grown);
                    char **grown_which = realloc(which_of, (g + 1) * sizeof *grown_which);
                    if (grown)
                        st->groups = grown;
                    if (grown_which)
                        which_of = grown_which;
                    if (grown == NULL || grown_which == NULL ||
                        (which_of[g] = strdup(which)) == NULL)
                        goto oom;
                    if (gnutls_certificate_allocate_credentials(&st->groups[g]) < 0) {
                        free(which_of[g]);
                        goto oom;
                    }
                    st->n_groups++;
                    for (size_t j = 0; j < pairs; j++)
                        if (which[j] == '1' &&
                            set_pair(st->groups[g], &p[j], cert_files[j], key_files[j], err,
                                     err_size) < 0)
                            goto out;
                }
                creds = st->groups[g];
            }
            struct sni_name *grown = realloc(st->names, (st->n_names + 1) * sizeof *grown);
            if (grown == NULL)
                goto oom;
            st->names = grown;
            if ((st->names[st->n_names].name = strdup(name)) == NULL)
                goto oom;
            st->names[st->n_names++].creds = creds;
        }
    rc = 0;
    goto out;
oom:
    refuse(err, err_size, "--ssl-cert: out of memory%s%s", "", "");
out:
    if (which_of)
        for (size_t g = 0; g < st->n_groups; g++)
            free(which_of[g]);
    free(which_of);
    free(which);
    return rc;
}

static gnutls_certificate_credentials_t sni_lookup(const char *name)
{
    for (size_t i = 0; i < sni.n_names; i++)
        if (strcmp(sni.names[i].name, name) == 0)
            return sni.names[i].creds;
    return NULL;
}

/* GnuTLS calls this once the ClientHello is read, before it chooses the
 * certificate: the credentials of the name the client asked for (an exact
 * name first, then "*." and the name less its first label). */
static int choose_by_sni(gnutls_session_t session)
{
    char name[256];
    size_t len = sizeof name - 1;
    unsigned type;
    if (gnutls_server_name_get(session, name, &len, &type, 0) < 0 || type != GNUTLS_NAME_DNS ||
        len == 0 || len >= sizeof name - 1)
        return 0;
    name[len] = '\0';
    lower_case(name);
    gnutls_certificate_credentials_t creds = sni_lookup(name);
    const char *rest = strchr(name, '.');
    if (creds == NULL && rest != NULL && rest > name && rest[1] != '\0') {
        char wildcard[sizeof name + 1];
        snprintf(wildcard, sizeof wildcard, "*%s", rest);
        creds = sni_lookup(wildcard);
    }
    if (creds != NULL && creds != credentials)
        return gnutls_credentials_set(session, GNUTLS_CRD_CERTIFICATE, creds);
    return 0;
}

int serow_tls_configure(const char *const *cert_files, const char *const *key_files,
                        size_t pairs, const char *given, int tickets, char *err, size_t err_size)
{
    gnutls_certificate_credentials_t creds = NULL;
    gnutls_priority_t prio = NULL;
    struct pair *p = calloc(pairs ? pairs : 1, sizeof *p);
    struct sni_state names = {0};
    int rc = -1, r;
    const char *where;
    if (given == NULL || *given == '\0')
        given = SEROW_TLS_DEFAULT_PRIORITIES;

    if (p == NULL || (r = gnutls_certificate_allocate_credentials(&creds)) < 0) {
        refuse(err, err_size, "--ssl-cert: out of memory%s%s", "", "");
        goto out;
    }
    /* In the order given: the first is the one a client that names no
     * host, or none of the certificates' names, gets. */
    for (size_t i = 0; i < pairs; i++)
        if (read_pair(&p[i], cert_files[i], key_files[i], err, err_size) < 0 ||
            set_pair(creds, &p[i], cert_files[i], key_files[i], err, err_size) < 0)
            goto out;
    if (pairs > 1 && sni_build(&names, p, pairs, creds, cert_files, key_files, err, err_size) < 0)
        goto out;
    /* --ssl-client-ca, --ssl-crl: in every set a session may get */
    if (serow_tls_peer_trust(creds, err, err_size) < 0)
        goto out;
    for (size_t i = 0; i < names.n_groups; i++)
        if (serow_tls_peer_trust(names.groups[i], err, err_size) < 0)
            goto out;
    if ((r = gnutls_priority_init(&prio, given, &where)) < 0) {
        refuse(err, err_size, "--ssl-priorities: '%s' is not a GnuTLS priority string (at '%s')",
               given, where ? where : "");
        goto out;
    }
    if (check_priorities(prio, given, err, err_size) < 0)
        goto out;
    if (tickets && ticket_key.data == NULL &&
        (r = gnutls_session_ticket_key_generate(&ticket_key)) < 0) {
        ticket_key.data = NULL;
        refuse(err, err_size, "--ssl-session-tickets: no key could be made (%s)%s",
               gnutls_strerror(r), "");
        goto out;
    }
    if (!tickets && ticket_key.data) {
        gnutls_memset(ticket_key.data, 0, ticket_key.size);
        gnutls_free(ticket_key.data);
        ticket_key.data = NULL;
        ticket_key.size = 0;
    }
    /* All read: only now is what served before replaced (a HUP with a bad
     * file keeps it). */
    if (credentials)
        gnutls_certificate_free_credentials(credentials);
    if (priorities)
        gnutls_priority_deinit(priorities);
    sni_clear(&sni);
    credentials = creds;
    priorities = prio;
    sni = names;
    creds = NULL;
    prio = NULL;
    memset(&names, 0, sizeof names);
    rc = 0;
out:
    sni_clear(&names);
    if (creds)
        gnutls_certificate_free_credentials(creds);
    if (prio)
        gnutls_priority_deinit(prio);
    if (p)
        for (size_t i = 0; i < pairs; i++)
            pair_clear(&p[i]);
    free(p);
    return rc;
}

int serow_tls_configure_clients(const char *mode, const char *ca_file, const char *crl_file,
                                unsigned long max_connections, char *err, size_t err_size)
{
    return serow_tls_peer_configure(mode, ca_file, crl_file, max_connections, err, err_size);
}

int serow_tls_configured(void)
{
    return credentials != NULL;
}

void serow_tls_accepted(struct serow_connection_state *cs)
{
    static uint64_t accepted;
    memset(cs, 0, sizeof *cs);
    cs->transport = SEROW_TRANSPORT_TLS;
    cs->tls_phase = SEROW_TLS_PHASE_HANDSHAKE;
    /* unique among the connections any process may have on one descriptor
     * number: the accepting process's pid and its count */
    cs->tls_id = (uint64_t)getpid() << 32 | (++accepted & 0xffffffffu);
}

/* ---- what a process keeps beside a connection it owns ----------------------- */

struct tls_local {
    uint64_t id;              /* the connection's tls_id; 0: none */
    gnutls_session_t session; /* during the handshake */
    uint8_t *plain;           /* opened, not read yet */
    size_t plain_off, plain_len;
    uint8_t *partial;         /* the start of a record still arriving */
    size_t partial_len;
    uint8_t *out;             /* sealed, not sent yet */
    size_t out_off, out_len;
    size_t unreported;        /* plaintext bytes in out the caller was not told of */
};

static struct tls_local *locals;
static int locals_size;

static void local_clear(struct tls_local *l)
{
    if (l->session)
        gnutls_deinit(l->session);
    free(l->plain);
    free(l->partial);
    free(l->out);
    memset(l, 0, sizeof *l);
}

/* What this process keeps beside the connection cs on fd: what it kept for
 * another connection on the same number is dropped.  NULL when there is no
 * memory for the table. */
static struct tls_local *local_of(const struct serow_connection_state *cs, int fd)
{
    if (fd < 0)
        return NULL;
    if (fd >= locals_size) {
        int size = locals_size ? locals_size : 64;
        while (size <= fd)
            size *= 2;
        struct tls_local *grown = realloc(locals, (size_t)size * sizeof *grown);
        if (grown == NULL)
            return NULL;
        memset(grown + locals_size, 0, (size_t)(size - locals_size) * sizeof *grown);
        locals = grown;
        locals_size = size;
    }
    struct tls_local *l = &locals[fd];
    if (l->id != cs->tls_id) {
        local_clear(l);
        l->id = cs->tls_id;
    }
    return l;
}

int serow_transport_buffered_tls(struct serow_connection_state *cs, int fd)
{
    if (cs->transport != SEROW_TRANSPORT_TLS || fd < 0 || fd >= locals_size ||
        locals[fd].id != cs->tls_id)
        return 0;
    return locals[fd].plain_len > 0 || locals[fd].partial_len > 0;
}

int serow_transport_handshake_writing_tls(const struct serow_connection_state *cs, int fd)
{
    if (cs->transport != SEROW_TRANSPORT_TLS || cs->tls_phase != SEROW_TLS_PHASE_HANDSHAKE ||
        fd < 0 || fd >= locals_size || locals[fd].id != cs->tls_id || locals[fd].session == NULL)
        return 0;
    /* (1: the library's last call stopped on a write; 0: on a read) */
    return gnutls_record_get_direction(locals[fd].session) == 1;
}

void serow_transport_forget_tls(struct serow_connection_state *cs, int fd)
{
    if (cs->transport != SEROW_TRANSPORT_TLS)
        return;
    if (cs->tls_phase == SEROW_TLS_PHASE_RECORDS)
        serow_tls_forget_keys(&cs->tls);
    if (fd >= 0 && fd < locals_size && locals[fd].id == cs->tls_id)
        local_clear(&locals[fd]);
}

/* ---- psgix.io: the app's handle on the connection (psgi_tls_socket.c) ---- */

int serow_tls_unread(struct serow_connection_state *cs, int fd, const void *data, size_t len)
{
    struct tls_local *l = local_of(cs, fd);
    uint8_t *p = l != NULL ? malloc(len + l->plain_len) : NULL;
    if (p == NULL)
        return -1;
    memcpy(p, data, len);
    if (l->plain_len)
        memcpy(p + len, l->plain + l->plain_off, l->plain_len);
    free(l->plain);
    l->plain = p;
    l->plain_off = 0;
    l->plain_len += len;
    return 0;
}

size_t serow_tls_unread_bytes(const struct serow_connection_state *cs, int fd)
{
    if (fd < 0 || fd >= locals_size || locals[fd].id != cs->tls_id)
        return 0;
    return locals[fd].plain_len;
}

int serow_tls_move_local(const struct serow_connection_state *cs, int from_fd, int to_fd)
{
    if (from_fd < 0 || from_fd >= locals_size || locals[from_fd].id != cs->tls_id)
        return 0; /* nothing kept */
    struct tls_local moved = locals[from_fd];
    memset(&locals[from_fd], 0, sizeof moved);
    struct tls_local *l = local_of(cs, to_fd); /* (may move the table: moved is a copy) */
    if (l == NULL) {
        local_clear(&moved);
        return -1;
    }
    *l = moved;
    return 0;
}

/* Buffers every process uses for one call at a time: ciphertext read or
 * peeked (a record begun and what follows it; the longest record either
 * version allows fits), plaintext gathered for sealing, and what it is
 * sealed into. */
#define IN_SCRATCH (96 * 1024)
#define OUT_CHUNK (64 * 1024)
static uint8_t *scratch_in, *scratch_plain, *scratch_out;
static size_t scratch_out_size;

static int scratch_ready(void)
{
    if (scratch_in)
        return 0;
    scratch_out_size = OUT_CHUNK + (OUT_CHUNK / SEROW_TLS_MAX_PLAINTEXT + 2) *
                                       SEROW_TLS_RECORD_OVERHEAD + 8;
    scratch_in = malloc(IN_SCRATCH);
    scratch_plain = malloc(OUT_CHUNK);
    scratch_out = malloc(scratch_out_size);
    if (scratch_in && scratch_plain && scratch_out)
        return 0;
    free(scratch_in);
    free(scratch_plain);
    free(scratch_out);
    scratch_in = scratch_plain = scratch_out = NULL;
    errno = ENOMEM;
    return -1;
}

/* ---- the handshake ------------------------------------------------------ */

/* nginx's answer, word for word but for the server's name. */
static const char plain_http_answer[] =
    "HTTP/1.1 400 Bad Request\r\n"
    "Content-Type: text/html\r\n"
    "Content-Length: 220\r\n"
    "Connection: close\r\n"
    "\r\n"
    "<html>\r\n"
    "<head><title>400 The plain HTTP request was sent to HTTPS port</title></head>\r\n"
    "<body>\r\n"
    "<center><h1>400 Bad Request</h1></center>\r\n"
    "<center>The plain HTTP request was sent to HTTPS port</center>\r\n"
    "</body>\r\n"
    "</html>\r\n";

/* A client spoke plain HTTP: what it sent is read (so that closing sends
 * no reset, which could destroy the answer before it is read), the answer
 * sent in plain text, and the sending side shut. */
static void answer_plain_http(int fd)
{
    char discard[4096];
    for (int i = 0; i < 16 && recv(fd, discard, sizeof discard, MSG_DONTWAIT) > 0; i++)
        ;
    ssize_t n = send(fd, plain_http_answer, sizeof plain_http_answer - 1,
                     MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)n;
    shutdown(fd, SHUT_WR);
}

static int handshake_failed(struct serow_connection_state *cs, struct tls_local *l,
                            const char *why)
{
    serow_log_debug("TLS handshake of process %d failed: %s", (int)getpid(), why);
    if (l->session)
        gnutls_deinit(l->session);
    l->session = NULL;
    cs->tls.flags |= SEROW_TLS_FAILED | SEROW_TLS_ALERT_SENT; /* nothing more is sealed */
    errno = EPROTO;
    return -1;
}

/* Takes the handshake as far as the socket allows.  1 when it is done (the
 * state exported, the library's session gone), 0 when the client left,
 * -1 with errno (EAGAIN: not yet). */
static int handshake(struct serow_connection_state *cs, int fd, struct tls_local *l)
{
    if (cs->tls.flags & SEROW_TLS_FAILED) {
        errno = EPROTO;
        return -1;
    }
    if (l->session == NULL) {
        uint8_t first;
        ssize_t n = recv(fd, &first, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n <= 0)
            return n == 0 ? 0 : -1;
        if (first != SEROW_TLS_HANDSHAKE) {
            /* (what else starts a request here is HTTP's method) */
            answer_plain_http(fd);
            return handshake_failed(cs, l, "plain HTTP was sent: answered 400");
        }
        if (credentials == NULL)
            return handshake_failed(cs, l, "no credentials");
        static const gnutls_datum_t http11 = {(unsigned char *)"http/1.1", 8};
        if (gnutls_init(&l->session, GNUTLS_SERVER | GNUTLS_NONBLOCK |
                                         (ticket_key.data ? 0 : GNUTLS_NO_TICKETS)) < 0) {
            l->session = NULL;
            return handshake_failed(cs, l, "no session");
        }
        if (gnutls_priority_set(l->session, priorities) < 0 ||
            gnutls_credentials_set(l->session, GNUTLS_CRD_CERTIFICATE, credentials) < 0 ||
            (ticket_key.data && gnutls_session_ticket_enable_server(l->session, &ticket_key) < 0) ||
            gnutls_alpn_set_protocols(l->session, &http11, 1, GNUTLS_ALPN_SERVER_PRECEDENCE) < 0)
            return handshake_failed(cs, l, "the session could not be set up");
        serow_tls_peer_ask(l->session); /* --ssl-verify-client */
        if (sni.n_names)
            gnutls_handshake_set_post_client_hello_function(l->session, choose_by_sni);
        gnutls_session_set_ptr(l->session, &cs->tls);
        gnutls_session_set_keylog_function(l->session, serow_tls_keylog);
        gnutls_handshake_set_hook_function(l->session, GNUTLS_HANDSHAKE_CLIENT_HELLO,
                                           GNUTLS_HOOK_PRE, serow_tls_client_hello);
        gnutls_transport_set_int(l->session, fd);
        /* (its time is --header-timeout's: the caller's timer) */
        gnutls_handshake_set_timeout(l->session, 0);
    }
    int r;
    do
        r = gnutls_handshake(l->session);
    while (r == GNUTLS_E_INTERRUPTED);
    if (r == GNUTLS_E_AGAIN) {
        errno = EAGAIN;
        return -1;
    }
    if (r < 0) {
        gnutls_alert_send_appropriate(l->session, r);
        return handshake_failed(cs, l, gnutls_strerror(r));
    }
    /* What the library read past the handshake and opened: the client's
     * first data, which counts toward the sequence number exported. */
    while (gnutls_record_check_pending(l->session) > 0) {
        uint8_t part[SEROW_TLS_MAX_PLAINTEXT];
        ssize_t n = gnutls_record_recv(l->session, part, sizeof part);
        if (n <= 0)
            break;
        uint8_t *grown = realloc(l->plain, l->plain_len + (size_t)n);
        if (grown == NULL)
            return handshake_failed(cs, l, "out of memory");
        memcpy(grown + l->plain_len, part, (size_t)n);
        l->plain = grown;
        l->plain_len += (size_t)n;
    }
    if (serow_tls_export(l->session, &cs->tls) < 0)
        return handshake_failed(cs, l, "the session's state could not be exported");
    /* what the env says of the session and of the client's certificate,
     * kept where any process that serves the connection reads it */
    const char *why;
    gnutls_alert_description_t alert;
    if (serow_tls_peer_record(l->session, cs, fd, &why, &alert) < 0) {
        gnutls_alert_send(l->session, GNUTLS_AL_FATAL, alert);
        return handshake_failed(cs, l, why);
    }
    gnutls_deinit(l->session);
    l->session = NULL;
    cs->tls_phase = SEROW_TLS_PHASE_RECORDS;
    return 1;
}

/* ---- what was sealed, before it is sent ------------------------------------ */

static void (*seal_observer)(const struct serow_connection_state *cs);

void serow_tls_set_seal_observer(void (*observer)(const struct serow_connection_state *cs))
{
    seal_observer = observer;
}

static inline void note_sealed(const struct serow_connection_state *cs)
{
    if (seal_observer != NULL)
        seal_observer(cs);
}

/* ---- reading ------------------------------------------------------------ */

/* A fatal alert the record layer chose, sent once, without waiting. */
static void send_alert(struct serow_connection_state *cs, int fd)
{
    uint8_t alert[SEROW_TLS_RECORD_OVERHEAD + 2];
    if (cs->tls.alert == SEROW_TLS_CLOSE_NOTIFY)
        return; /* the peer's own alert ended it */
    long n = serow_tls_seal_alert(&cs->tls, cs->tls.alert, alert, sizeof alert);
    if (n > 0)
        note_sealed(cs);
    if (n > 0 && send(fd, alert, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
        /* (nothing to do: the connection ends either way) */
    }
}

/* The plaintext kept from a record longer than a read's room. */
static size_t take_kept(struct tls_local *l, uint8_t *into, size_t room, int peek)
{
    size_t n = l->plain_len < room ? l->plain_len : room;
    memcpy(into, l->plain + l->plain_off, n);
    if (!peek) {
        l->plain_off += n;
        l->plain_len -= n;
        if (l->plain_len == 0) {
            free(l->plain);
            l->plain = NULL;
            l->plain_off = 0;
        }
    }
    return n;
}

static int keep_plain(struct tls_local *l, const uint8_t *data, size_t len)
{
    uint8_t *grown = realloc(l->plain, l->plain_off + l->plain_len + len);
    if (grown == NULL)
        return -1;
    memcpy(grown + l->plain_off + l->plain_len, data, len);
    l->plain = grown;
    l->plain_len += len;
    return 0;
}

/* The peek of the holder (is a request there? what is its head?): the
 * records there are opened with a copy of the state, so that nothing is
 * taken and the state does not move.  -1 with EINPROGRESS when bytes are
 * there but no data yet (a record not all there, a KeyUpdate): a worker
 * must read them. */
static ssize_t peek_records(struct serow_connection_state *cs, int fd, struct tls_local *l,
                            uint8_t *into, size_t room)
{
    if (l->plain_len)
        return (ssize_t)take_kept(l, into, room, 1);
    if (cs->tls.flags & SEROW_TLS_PEER_CLOSED)
        return 0;
    size_t have = l->partial_len;
    if (have)
        memcpy(scratch_in, l->partial, have);
    ssize_t got = recv(fd, scratch_in + have, IN_SCRATCH - have, MSG_PEEK | MSG_DONTWAIT);
    if (got <= 0 && have == 0)
        return got;
    size_t n = have + (got > 0 ? (size_t)got : 0);
    struct serow_tls_state copy = cs->tls;
    size_t off = 0, done = 0;
    ssize_t result = -1;
    while (done < room) {
        struct serow_tls_record rec;
        long t = serow_tls_open(&copy, scratch_in + off, n - off, &rec);
        if (t < 0) {
            errno = EPROTO;
            goto out;
        }
        if (t == 0) {
            if (done == 0) {
                /* a record is arriving, or only records with no data (a
                 * KeyUpdate) are there: bytes a worker must read */
                errno = EINPROGRESS;
                goto out;
            }
            break;
        }
        off += (size_t)t;
        if (rec.type == SEROW_TLS_APPLICATION_DATA) {
            size_t part = rec.len < room - done ? rec.len : room - done;
            memcpy(into + done, rec.data, part);
            done += part;
        }
        if (copy.flags & SEROW_TLS_PEER_CLOSED)
            break;
    }
    result = (ssize_t)done;
out:
    explicit_bzero(&copy, sizeof copy);
    return result;
}

/* Reads what the socket has, up to about room more than the start of a
 * record kept, and opens the whole records into into (what does not fit
 * is kept, as is a record's start).  Returns the plaintext's length (0:
 * the client closed), or -1 with errno (EAGAIN: no whole record yet). */
static ssize_t read_records(struct serow_connection_state *cs, int fd, struct tls_local *l,
                            uint8_t *into, size_t room, uint64_t *stamp_ns)
{
    struct serow_tls_state *st = &cs->tls;
    size_t done = 0;
    for (;;) {
        if (st->flags & SEROW_TLS_FAILED) {
            errno = ECONNRESET;
            return done ? (ssize_t)done : -1;
        }
        if (st->flags & SEROW_TLS_PEER_CLOSED)
            return (ssize_t)done;
        size_t have = l->partial_len;
        if (have)
            memcpy(scratch_in, l->partial, have);
        /* (what room takes, with its records' overhead: what is read past
         * it is opened and kept, and epoll sees what is left) */
        size_t want = room - done + 1024;
        if (want < SEROW_TLS_MAX_RECORD + 2048)
            want = SEROW_TLS_MAX_RECORD + 2048;
        if (want > IN_SCRATCH - have)
            want = IN_SCRATCH - have;
        ssize_t n = stamp_ns != NULL
                        ? serow_recv_stamped(fd, scratch_in + have, want, MSG_DONTWAIT, stamp_ns)
                        : recv(fd, scratch_in + have, want, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return done ? (ssize_t)done : n; /* (the end cuts a record begun: the end all the same) */
        stamp_ns = NULL;
        size_t len = have + (size_t)n, off = 0;
        for (;;) {
            struct serow_tls_record rec;
            long t = serow_tls_open(st, scratch_in + off, len - off, &rec);
            if (t < 0) {
                send_alert(cs, fd);
                break;
            }
            if (t == 0)
                break;
            off += (size_t)t;
            if (rec.type != SEROW_TLS_APPLICATION_DATA || rec.len == 0)
                continue;
            size_t part = rec.len < room - done ? rec.len : room - done;
            memcpy(into + done, rec.data, part);
            done += part;
            if (part < rec.len && keep_plain(l, rec.data + part, rec.len - part) < 0) {
                st->flags |= SEROW_TLS_FAILED | SEROW_TLS_ALERT_SENT;
                errno = ENOMEM;
                return done ? (ssize_t)done : -1;
            }
        }
        /* the start of the next record, kept */
        size_t rest = (st->flags & SEROW_TLS_FAILED) ? 0 : len - off;
        if (rest != l->partial_len || rest == 0) {
            free(l->partial);
            l->partial = rest ? malloc(rest) : NULL;
            if (rest && l->partial == NULL) {
                st->flags |= SEROW_TLS_FAILED | SEROW_TLS_ALERT_SENT;
                errno = ENOMEM;
                return done ? (ssize_t)done : -1;
            }
        }
        if (rest)
            memcpy(l->partial, scratch_in + off, rest);
        l->partial_len = rest;
        /* Only alerts, KeyUpdates or a record's start (or the end): read
         * on, up to EAGAIN.  Else the caller has what there is. */
        if (done > 0)
            return (ssize_t)done;
    }
}

static ssize_t tls_recv(struct serow_connection_state *cs, int fd, void *into, size_t room,
                        int flags, uint64_t *stamp_ns)
{
    if (stamp_ns)
        *stamp_ns = 0;
    struct tls_local *l = local_of(cs, fd);
    if (l == NULL || scratch_ready() < 0) {
        errno = ENOMEM;
        return -1;
    }
    if (cs->tls_phase == SEROW_TLS_PHASE_HANDSHAKE) {
        int r = handshake(cs, fd, l);
        if (r <= 0)
            return r;
    }
    if (room == 0)
        return 0;
    if (flags & MSG_PEEK)
        return peek_records(cs, fd, l, into, room);
    if (l->plain_len)
        return (ssize_t)take_kept(l, into, room, 0);
    return read_records(cs, fd, l, into, room, stamp_ns);
}

/* ---- writing ------------------------------------------------------------ */

/* Sends what the socket did not take before.  0 when all went. */
static int flush_out(int fd, struct tls_local *l)
{
    while (l->out_off < l->out_len) {
        ssize_t n = send(fd, l->out + l->out_off, l->out_len - l->out_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        l->out_off += (size_t)n;
    }
    free(l->out);
    l->out = NULL;
    l->out_off = l->out_len = 0;
    return 0;
}

/* Seals data[0..len) (len at most OUT_CHUNK) and sends it.  Returns the
 * bytes the caller may count as sent, or -1 with errno: see the rule at
 * the top of this file. */
static ssize_t seal_and_send(struct serow_connection_state *cs, int fd, struct tls_local *l,
                             const void *data, size_t len, int flags)
{
    if (l->out_len) {
        if (flush_out(fd, l) < 0)
            return -1;
        size_t n = l->unreported;
        l->unreported = 0;
        return (ssize_t)(n < len ? n : len);
    }
    if (len == 0)
        return 0;
    if (cs->tls.write_limit) { /* small records: more of them than scratch_out was sized for */
        size_t fits = serow_tls_seal_fits(&cs->tls, scratch_out_size);
        if (len > fits)
            len = fits;
    }
    long sealed = serow_tls_seal(&cs->tls, data, len, scratch_out, scratch_out_size);
    if (sealed < 0) {
        errno = EPIPE;
        return -1;
    }
    note_sealed(cs);
    size_t sent = 0;
    while (sent < (size_t)sealed) {
        ssize_t n = send(fd, scratch_out + sent, (size_t)sealed - sent,
                         MSG_NOSIGNAL | MSG_DONTWAIT | (flags & MSG_MORE));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno != EAGAIN)
            return -1; /* (the connection is broken: nothing to keep) */
        if (n < 0)
            break;
        sent += (size_t)n;
    }
    if (sent == (size_t)sealed)
        return (ssize_t)len;
    l->out = malloc((size_t)sealed - sent);
    if (l->out == NULL) {
        errno = ENOMEM;
        return -1;
    }
    memcpy(l->out, scratch_out + sent, (size_t)sealed - sent);
    l->out_len = (size_t)sealed - sent;
    if (sent == 0 || len == 1) {
        l->unreported = len;
        errno = EAGAIN;
        return -1;
    }
    l->unreported = 1;
    return (ssize_t)len - 1;
}

static struct tls_local *writable(struct serow_connection_state *cs, int fd)
{
    if (cs->tls_phase != SEROW_TLS_PHASE_RECORDS) {
        errno = EPIPE; /* (an error page for a handshake that did not end) */
        return NULL;
    }
    struct tls_local *l = local_of(cs, fd);
    if (l == NULL || scratch_ready() < 0) {
        errno = ENOMEM;
        return NULL;
    }
    return l;
}

static ssize_t tls_send(struct serow_connection_state *cs, int fd, const void *data, size_t len,
                        int flags)
{
    struct tls_local *l = writable(cs, fd);
    if (l == NULL)
        return -1;
    return seal_and_send(cs, fd, l, data, len < OUT_CHUNK ? len : OUT_CHUNK, flags);
}

static ssize_t tls_writev(struct serow_connection_state *cs, int fd, const struct iovec *iov,
                          int iovcnt)
{
    struct tls_local *l = writable(cs, fd);
    if (l == NULL)
        return -1;
    /* gathered into one buffer: a head and a short body make one record */
    size_t len = 0;
    for (int i = 0; i < iovcnt && len < OUT_CHUNK; i++) {
        size_t part = iov[i].iov_len < OUT_CHUNK - len ? iov[i].iov_len : OUT_CHUNK - len;
        if (l->out_len == 0)
            memcpy(scratch_plain + len, iov[i].iov_base, part);
        len += part;
    }
    return seal_and_send(cs, fd, l, scratch_plain, len, 0);
}

static ssize_t tls_sendfile(struct serow_connection_state *cs, int fd, int file_fd,
                            off_t *offset, size_t count)
{
    struct tls_local *l = writable(cs, fd);
    if (l == NULL)
        return -1;
    size_t len = count < OUT_CHUNK ? count : OUT_CHUNK;
    if (l->out_len == 0) {
        ssize_t r = pread(file_fd, scratch_plain, len, *offset);
        if (r <= 0)
            return r;
        len = (size_t)r;
    }
    ssize_t n = seal_and_send(cs, fd, l, scratch_plain, len, 0);
    if (n > 0)
        *offset += n;
    return n;
}

static int tls_shutdown(struct serow_connection_state *cs, int fd)
{
    if (cs->tls_phase == SEROW_TLS_PHASE_RECORDS) {
        struct tls_local *l = local_of(cs, fd);
        uint8_t alert[SEROW_TLS_RECORD_OVERHEAD + 2];
        long n;
        if ((l == NULL || flush_out(fd, l) == 0) &&
            (n = serow_tls_seal_alert(&cs->tls, SEROW_TLS_CLOSE_NOTIFY, alert, sizeof alert)) > 0 &&
            (note_sealed(cs), send(fd, alert, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT)) < 0) {
            /* (a client gone: shut the socket all the same) */
        }
    }
    return shutdown(fd, SHUT_WR);
}

const struct serow_transport_ops serow_tls_transport_ops = {
    tls_recv, tls_send, tls_writev, tls_sendfile, tls_shutdown,
};
