/*
 * psgi_env.c - the PSGI env of a request, built in C from the parsed head.
 *
 * Building a hash of about 30 entries and freeing it again was most of what
 * a small request cost a worker (allocating and freeing entries, values and
 * string buffers, and looking shared keys up in Perl's table to free them).
 * So the env of the previous request is reused when the app kept no
 * reference to it: its entries stay, their values are overwritten in place,
 * and whatever the app added or changed is dropped (see "Reusing the env").
 *
 * Owns: the env and its per-process caches (the env kept for reuse, the
 * key and slot tables, the template).  The handles the env lends the app
 * are psgi_input.c's; the request's fields it reads are the request's
 * (request.h), its listener the worker's (worker_loop.h), and it writes
 * none of them.
 */
#define PERL_NO_GET_CONTEXT
#include "psgi/psgi_env.h"

#include "XSUB.h"

#include "psgi/psgi_input.h"
#include "connection/connection.h"
#include "connection/tls_peer.h"
#include "request/request.h"
#include "worker/worker_loop.h"

/* What an entry of the env holds, which says how a kept entry is made ready
 * for the next request. */
enum slot_kind {
    SLOT_REQUEST,          /* a string or number of the request, overwritten in place */
    SLOT_CONSTANT,         /* a template value (psgi.version...), the same every time */
    SLOT_SOCKET_HANDLE,    /* psgix.io: a value with get magic (made on first read) */
    SLOT_CLEANUP_HANDLERS, /* psgix.cleanup.handlers: a reference to an array */
    SLOT_EMPTY_INPUT,      /* psgi.input: kept when it is the shared empty handle */
};

/* One key the env has on every request or often, made once as a shared
 * string with its hash, so that storing it neither hashes the key nor looks
 * it up in Perl's table of shared keys; and what the reuse of an env needs
 * to know about its entry. */
struct env_slot {
    SV *key;
    enum slot_kind kind;
    SV *constant;     /* SLOT_CONSTANT: the value every env starts with */
    HE *kept;         /* the reused env's entry for this key, until the build takes it */
    SV *value;        /* the value in the env being built, when generation is current */
    unsigned long generation;
};

/* Keys set by the request itself. */
enum env_key {
    KEY_REQUEST_METHOD,
    KEY_PATH_INFO,
    KEY_REQUEST_URI,
    KEY_QUERY_STRING,
    KEY_SERVER_PROTOCOL,
    KEY_SERVER_NAME,
    KEY_SERVER_PORT,
    KEY_REMOTE_ADDR,
    KEY_REMOTE_PORT,
    KEY_CONTENT_LENGTH,
    KEY_CONTENT_TYPE,
    KEY_HTTP_HOST,
    KEY_PSGIX_IO,
    KEY_PSGIX_CLEANUP_HANDLERS,
    KEY_PSGI_INPUT,
    KEY_PSGIX_REQUEST_ID,
    KEY_COUNT
};

static const char *const key_names[KEY_COUNT] = {
    "REQUEST_METHOD", "PATH_INFO",   "REQUEST_URI", "QUERY_STRING",   "SERVER_PROTOCOL",
    "SERVER_NAME",    "SERVER_PORT", "REMOTE_ADDR", "REMOTE_PORT",    "CONTENT_LENGTH",
    "CONTENT_TYPE",   "HTTP_HOST",   "psgix.io",    "psgix.cleanup.handlers", "psgi.input",
    "psgix.request_id",
};

static struct env_slot request_slots[KEY_COUNT];

/* Request headers common enough to have their HTTP_* key made once (and
 * their entry reused); any other header's key is made (and hashed) per
 * request.  Host is KEY_HTTP_HOST. */
static const char *const common_headers[] = {
    "Accept", "Accept-Charset", "Accept-Encoding", "Accept-Language", "Authorization",
    "Cache-Control", "Connection", "Cookie", "DNT", "Forwarded", "If-Modified-Since",
    "If-None-Match", "Keep-Alive", "Origin", "Pragma", "Priority", "Range", "Referer",
    "Sec-Fetch-Dest", "Sec-Fetch-Mode", "Sec-Fetch-Site", "Sec-Fetch-User", "TE", "Upgrade",
    "Upgrade-Insecure-Requests", "User-Agent", "Via", "X-Forwarded-For", "X-Forwarded-Host",
    "X-Forwarded-Proto", "X-Real-IP", "X-Request-ID", "X-Requested-With", "Expect",
    "Transfer-Encoding",
};
#define COMMON_HEADER_COUNT (sizeof(common_headers) / sizeof(common_headers[0]))
/* The longest header name with a key of its own would make "HTTP_" and it
 * longer than this. */
#define COMMON_HEADER_MAX_LEN 32
static struct env_slot header_slots[COMMON_HEADER_COUNT];

/* The request headers with a slot (the common ones, Host, Content-Type and
 * Content-Length), found by name in any case through a small open-addressing
 * table on the name's length and its first and last letters: one
 * comparison, where a scan of the list took one per header before it. */
static struct known_header {
    const char *name;      /* NULL: a free place */
    size_t len;
    struct env_slot *slot;
    const char *separator; /* a repeated field joins with this; NULL: the last one counts */
} known_headers[128];
#define KNOWN_HEADERS_MASK (sizeof(known_headers) / sizeof(known_headers[0]) - 1)

static size_t known_header_place(const char *name, size_t len)
{
    unsigned first = (unsigned char)name[0] | 0x20, last = (unsigned char)name[len - 1] | 0x20;
    return (len * 7 + first * 3 + last) & KNOWN_HEADERS_MASK;
}

static void add_known_header(const char *name, struct env_slot *slot, const char *separator)
{
    size_t len = strlen(name);
    size_t i = known_header_place(name, len);
    while (known_headers[i].name != NULL)
        i = (i + 1) & KNOWN_HEADERS_MASK;
    known_headers[i] = (struct known_header){name, len, slot, separator};
}

/* (inlined: it runs for every header of every request, and a call costs
 * more than its usual one probe) */
static inline __attribute__((always_inline)) const struct known_header *
known_header(const char *name, size_t len)
{
    if (len == 0)
        return NULL;
    for (size_t i = known_header_place(name, len); known_headers[i].name != NULL;
         i = (i + 1) & KNOWN_HEADERS_MASK) {
        const struct known_header *h = &known_headers[i];
        if (h->len == len && strncasecmp(h->name, name, len) == 0)
            return h;
    }
    return NULL;
}

/* The env entries that are the same for every request (psgi.version,
 * psgi.errors...): the key made once, the value copied per new env. */
static struct env_slot *constant_slots;
static size_t constant_count;

/* A hash with fewer buckets than this splits (rehashes every key) as the
 * env fills: a plain request has about 30 keys. */
#define ENV_EXPECTED_KEYS 32

/* Every env built so far has a number: a slot whose generation is the
 * current one has its value in the env being built. */
static unsigned long env_generation;

static SV *shared_key(pTHX_ const char *name, size_t len)
{
    return newSVpvn_share(name, (I32)len, 0);
}

static HEK *slot_hek(const struct env_slot *slot)
{
    return SvSHARED_HEK_FROM_PV(SvPVX_const(slot->key));
}

/* A value of its own for one env.  newSVsv handles anything but costs
 * more than the constructor for the value's type (a reference, an integer,
 * a short byte string: what a template holds). */
static SV *copy_value(pTHX_ SV *value)
{
    if (SvROK(value))
        return newRV_inc(SvRV(value));
    if (SvIOK(value) && !SvPOK(value) && !SvNOK(value) && !SvIsUV(value))
        return newSViv(SvIVX(value));
    if (SvPOK(value) && !SvUTF8(value) && !SvIOK(value) && !SvNOK(value))
        return newSVpvn(SvPVX(value), SvCUR(value));
    return newSVsv(value);
}

/* ---- Which slot an entry belongs to --------------------------------------
 *
 * Shared keys are unique: an entry's key is a slot's key when it is the
 * same HEK, whoever stored it (this file, or the app with $env->{KEY}).
 * An open-addressing table on the key's hash finds the slot of an entry.
 */

static struct slot_table_entry {
    HEK *hek;
    struct env_slot *slot;
} *slot_table;
static size_t slot_table_mask;
/* The slots whose entry the reused env kept (see serow_psgi_env_retire), template
 * values aside, and how many of them the build has taken so far: when it
 * has taken them all, no entry is left to delete. */
static struct env_slot **kept_slots;
static size_t kept_count;
static size_t kept_taken;
/* How many template values the reused env kept: all of them, and the build
 * has nothing to do for those. */
static size_t kept_constants;
/* The kept slots whose value holds something of the app's to drop. */
static struct env_slot **reset_slots;

/* (serow_psgi_env_init has made the table) */
static struct env_slot *slot_of(HEK *hek)
{
    for (size_t i = HEK_HASH(hek) & slot_table_mask;; i = (i + 1) & slot_table_mask) {
        struct slot_table_entry *e = &slot_table[i];
        if (e->hek == hek || e->hek == NULL)
            return e->slot;
    }
}

static void add_to_slot_table(struct env_slot *slot)
{
    HEK *hek = slot_hek(slot);
    size_t i = HEK_HASH(hek) & slot_table_mask;
    for (; slot_table[i].hek != NULL; i = (i + 1) & slot_table_mask)
        if (slot_table[i].hek == hek)
            return; /* the same key twice: the first slot has it */
    slot_table[i].hek = hek;
    slot_table[i].slot = slot;
}

static void build_slot_table(void)
{
    size_t count = KEY_COUNT + COMMON_HEADER_COUNT + constant_count;
    size_t size = 16;
    while (size < count * 4) /* mostly empty: a lookup ends at once */
        size *= 2;
    Safefree(slot_table);
    Newxz(slot_table, size, struct slot_table_entry);
    slot_table_mask = size - 1;
    for (int i = 0; i < KEY_COUNT; i++)
        add_to_slot_table(&request_slots[i]);
    for (size_t i = 0; i < COMMON_HEADER_COUNT; i++)
        if (header_slots[i].key != NULL)
            add_to_slot_table(&header_slots[i]);
    for (size_t i = 0; i < constant_count; i++)
        add_to_slot_table(&constant_slots[i]);
    Safefree(kept_slots);
    Newx(kept_slots, count, struct env_slot *);
    Safefree(reset_slots);
    Newx(reset_slots, count, struct env_slot *);
    kept_count = 0;
}

/* ---- Reusing the env ------------------------------------------------------
 *
 * The worker drops its reference to the env once the request is over; if
 * that leaves the hash with ours only (no reference kept in a closure, a
 * global, an object, psgix.cleanup handlers, no weak reference), nothing
 * can see it any more, and serow_psgi_env_retire makes it ready for the next request.
 * It does so right away, before the worker waits for that request, so that
 * what the app stored in the env is freed as soon as it was when each env
 * was freed: keys the app added are deleted, values the app replaced,
 * references and big strings are dropped.  Kept are the entries of known
 * keys whose value is still a plain scalar only the env holds: the next
 * build overwrites them in place, and deletes those it does not set.
 */

static HV *last_env;        /* the env handed out last, with a reference of ours */
static int last_env_ready;  /* serow_psgi_env_retire has run on it: the build may reuse it */

/* A string buffer bigger than this is not kept for the next request: one
 * big header must not hold memory in every later env. */
#define KEPT_STRING_MAX 4096

/* A value only the env holds, with nothing attached: it can be
 * overwritten. */
static int plain_value(SV *value)
{
    return SvREFCNT(value) == 1 && SvTYPE(value) < SVt_PVMG && !SvREADONLY(value);
}

/* Whether two scalars hold the same plain value, flags included. */
static int same_value(SV *a, SV *b)
{
    const U32 flags = SVf_OK | SVf_UTF8 | SVf_IVisUV;
    if ((SvFLAGS(a) & flags) != (SvFLAGS(b) & flags))
        return 0;
    if (SvROK(b))
        return SvRV(a) == SvRV(b);
    /* (most template strings are empty: no memcmp call for those) */
    if (SvPOK(b) && (SvCUR(a) != SvCUR(b) ||
                     (SvCUR(b) != 0 && memcmp(SvPVX(a), SvPVX(b), SvCUR(b)) != 0)))
        return 0;
    if (SvIOK(b) && SvIVX(a) != SvIVX(b))
        return 0;
    if (SvNOK(b) && SvNVX(a) != SvNVX(b))
        return 0;
    return 1;
}

/* The magic psgix.io gets from lazy_socket_handle, when it is all the
 * value has. */
static MAGIC *socket_handle_magic(SV *value)
{
    if (SvREFCNT(value) != 1 || SvTYPE(value) != SVt_PVMG || SvOBJECT(value) ||
        SvREADONLY(value))
        return NULL;
    MAGIC *mg = SvMAGIC(value);
    if (mg == NULL || mg->mg_moremagic != NULL || mg->mg_type != PERL_MAGIC_ext ||
        mg->mg_virtual != &serow_socket_handle_vtbl)
        return NULL;
    return mg;
}

/* What becomes of an entry of the env being retired. */
enum entry_fate {
    ENTRY_DROPPED,
    ENTRY_KEPT,
    ENTRY_KEPT_AFTER_RESET, /* kept once reset_kept_value has run */
};

/* Whether the entry of a slot can stay for the next request.  Runs no Perl
 * code: what the value holds is dropped by reset_kept_value, once the hash
 * is whole again (dropping a reference can run a DESTROY).  empty_input: the
 * empty psgi.input handle's glob (asked once per walk, not per entry). */
static enum entry_fate entry_fate(pTHX_ struct env_slot *slot, SV *value, SV *empty_input)
{
    switch (slot->kind) {
    case SLOT_REQUEST:
        if (!plain_value(value) || SvROK(value))
            return ENTRY_DROPPED;
        return !SvPOK(value) || SvLEN(value) <= KEPT_STRING_MAX ? ENTRY_KEPT : ENTRY_DROPPED;
    case SLOT_CONSTANT:
        if (!plain_value(value))
            return ENTRY_DROPPED;
        return same_value(value, slot->constant) ? ENTRY_KEPT : ENTRY_KEPT_AFTER_RESET;
    case SLOT_SOCKET_HANDLE: {
        MAGIC *mg = socket_handle_magic(value);
        if (mg == NULL)
            return ENTRY_DROPPED;
        mg->mg_private = 0; /* unresolved: the next request's handle is made on read */
        return SvROK(value) ? ENTRY_KEPT_AFTER_RESET : ENTRY_KEPT;
    }
    case SLOT_CLEANUP_HANDLERS: {
        if (!plain_value(value) || !SvROK(value))
            return ENTRY_DROPPED;
        SV *handlers = SvRV(value);
        if (SvTYPE(handlers) != SVt_PVAV || SvREFCNT(handlers) != 1 || SvMAGIC(handlers) ||
            SvOBJECT(handlers) || SvREADONLY(handlers) || !AvREAL((AV *)handlers))
            return ENTRY_DROPPED;
        return AvFILLp((AV *)handlers) >= 0 ? ENTRY_KEPT_AFTER_RESET : ENTRY_KEPT;
    }
    case SLOT_EMPTY_INPUT:
        return plain_value(value) && SvROK(value) && SvRV(value) == empty_input
                   ? ENTRY_KEPT
                   : ENTRY_DROPPED;
    }
    return ENTRY_DROPPED;
}

/* Drops what the app left in a kept value (ENTRY_KEPT_AFTER_RESET). */
static void reset_kept_value(pTHX_ struct env_slot *slot, SV *value)
{
    switch (slot->kind) {
    case SLOT_CONSTANT:
        sv_setsv(value, slot->constant);
        break;
    case SLOT_SOCKET_HANDLE:
        sv_setiv(value, 0); /* the handle made for the request */
        break;
    case SLOT_CLEANUP_HANDLERS:
        av_clear((AV *)SvRV(value)); /* they have run */
        break;
    default:
        break;
    }
}

/* Whether the env can be reused: only we hold it, and it is a plain hash
 * (not blessed, tied, restricted, or weakly referenced). */
static int env_reusable(HV *env)
{
    return SvREFCNT(env) == 1 && !SvOBJECT(env) && !SvREADONLY(env) && SvMAGIC(env) == NULL &&
           !(SvOOK(env) && HvAUX(env)->xhv_backreferences != NULL) && HvSHAREKEYS(env);
}

static void forget_kept_entries(void)
{
    for (size_t i = 0; i < kept_count; i++)
        kept_slots[i]->kept = NULL;
    kept_count = 0;
    kept_taken = 0;
    kept_constants = 0;
    /* Template values kept were marked as set for the next build: no longer. */
    env_generation++;
}

static void forget_last_env(pTHX)
{
    HV *env = last_env;
    forget_kept_entries();
    last_env = NULL;
    last_env_ready = 0;
    SvREFCNT_dec(env);
}

void serow_psgi_env_retire(pTHX)
{
    HV *env = last_env;
    if (env == NULL || last_env_ready)
        return;
    if (!env_reusable(env)) {
        forget_last_env(aTHX); /* the app's now */
        return;
    }
    /* An iteration the app left unfinished ends (and an entry it deleted
     * during one is freed), so that no iterator points at an entry that
     * goes below. */
    if (SvOOK(env))
        hv_iterinit(env);
    SV *empty_input = serow_input_empty_glob();

    /* Entries that go are unlinked while walking the buckets, and freed after
     * it: freeing a value may call a DESTROY, which could call back in here. */
    HE *unlinked = NULL;
    HE **buckets = HvARRAY(env);
    STRLEN last_bucket = HvMAX(env);
    STRLEN removed = 0;
    size_t kept = 0; /* (kept_count in a local: stores through link could change it) */
    size_t constants = 0;
    size_t resets = 0;
    unsigned long next_generation = env_generation + 1;
    if (buckets != NULL) {
        for (STRLEN i = 0; i <= last_bucket; i++) {
            HE **link = &buckets[i];
            HE *entry;
            while ((entry = *link) != NULL) {
                struct env_slot *slot = HeKLEN(entry) == HEf_SVKEY ? NULL : slot_of(HeKEY_hek(entry));
                /* (A hash has one entry per key: no slot matches two.) */
                enum entry_fate fate =
                    slot != NULL ? entry_fate(aTHX_ slot, HeVAL(entry), empty_input)
                                 : ENTRY_DROPPED;
                if (fate != ENTRY_DROPPED) {
                    slot->value = HeVAL(entry);
                    if (slot->kind == SLOT_CONSTANT) {
                        /* Its value is the next build's already. */
                        slot->generation = next_generation;
                        constants++;
                    } else {
                        slot->kept = entry;
                        kept_slots[kept++] = slot;
                    }
                    if (fate == ENTRY_KEPT_AFTER_RESET)
                        reset_slots[resets++] = slot;
                    link = &HeNEXT(entry);
                } else {
                    *link = HeNEXT(entry);
                    HeNEXT(entry) = unlinked;
                    unlinked = entry;
                    removed++;
                }
            }
        }
    }
    HvTOTALKEYS(env) -= removed;
    kept_count = kept;
    kept_taken = 0;
    kept_constants = constants;
    last_env_ready = 1;
    /* The hash is whole: values can be freed. */
    for (size_t i = 0; i < resets; i++)
        reset_kept_value(aTHX_ reset_slots[i], reset_slots[i]->value);
    while (unlinked != NULL) {
        HE *next = HeNEXT(unlinked);
        hv_free_ent(env, unlinked);
        unlinked = next;
    }
}

/* The scalar that holds the slot's value in env for this request: the one
 * already set this request, the kept one, or a new one stored now. */
static SV *slot_value(pTHX_ HV *env, struct env_slot *slot)
{
    if (slot->generation == env_generation)
        return slot->value;
    slot->generation = env_generation;
    if (slot->kept != NULL) {
        slot->value = HeVAL(slot->kept);
        slot->kept = NULL;
        kept_taken++;
    } else {
        slot->value = newSV(0);
        (void)hv_store_ent(env, slot->key, slot->value, SvSHARED_HASH(slot->key));
    }
    return slot->value;
}

/* Stores a value made whole (a reference, a magic scalar) for the slot. */
static void store_new(pTHX_ HV *env, struct env_slot *slot, SV *value)
{
    slot->generation = env_generation;
    slot->value = value;
    slot->kept = NULL;
    (void)hv_store_ent(env, slot->key, value, SvSHARED_HASH(slot->key));
}

/* The flags of a scalar that holds only a string of bytes, or only an
 * integer, with no magic. */
#define VALUE_FLAGS (SVf_OK | SVf_UTF8 | SVf_IVisUV | SVs_GMG | SVs_SMG | SVs_RMG)
#define ONLY_BYTES (SVf_POK | SVp_POK)
#define ONLY_INTEGER (SVf_IOK | SVp_IOK)

/* Bytes (never characters: a kept value may have been UTF-8).  A kept
 * value that holds them already (the same method, protocol, host, user
 * agent as the last request: the usual case) is left as it is. */
static void set_bytes(pTHX_ SV *sv, const char *bytes, size_t len)
{
    if ((SvFLAGS(sv) & VALUE_FLAGS) == ONLY_BYTES && SvCUR(sv) == len &&
        memcmp(SvPVX(sv), bytes, len) == 0)
        return;
    sv_setpvn(sv, bytes, len);
    SvUTF8_off(sv);
}

static void set_integer(pTHX_ SV *sv, IV n)
{
    if ((SvFLAGS(sv) & VALUE_FLAGS) == ONLY_INTEGER && SvIVX(sv) == n)
        return;
    sv_setiv(sv, n);
}

static void set_key_bytes(pTHX_ HV *env, enum env_key key, const char *bytes, size_t len)
{
    set_bytes(aTHX_ slot_value(aTHX_ env, &request_slots[key]), bytes, len);
}

/* Entries kept for keys this request does not have. */
static void delete_unused_kept_entries(pTHX_ HV *env)
{
    for (size_t i = 0; kept_taken < kept_count && i < kept_count; i++) {
        struct env_slot *slot = kept_slots[i];
        if (slot->kept != NULL) {
            slot->kept = NULL;
            (void)hv_delete_ent(env, slot->key, G_DISCARD, SvSHARED_HASH(slot->key));
            kept_taken++;
        }
    }
    kept_count = 0;
    kept_taken = 0;
}

/* The env key of a header field: "HTTP_" and its name in upper case, '-'
 * as '_' (out has room for 5 + len bytes). */
static void header_key(char *out, const char *name, size_t len)
{
    memcpy(out, "HTTP_", 5);
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        out[5 + i] = c == '-' ? '_' : (c >= 'a' && c <= 'z') ? (char)(c - 32) : c;
    }
}

void serow_psgi_env_init(pTHX)
{
    for (int i = 0; i < KEY_COUNT; i++) {
        struct env_slot *slot = &request_slots[i];
        if (slot->key != NULL)
            continue;
        slot->key = shared_key(aTHX_ key_names[i], strlen(key_names[i]));
        slot->kind = i == KEY_PSGIX_IO                 ? SLOT_SOCKET_HANDLE
                     : i == KEY_PSGIX_CLEANUP_HANDLERS ? SLOT_CLEANUP_HANDLERS
                     : i == KEY_PSGI_INPUT             ? SLOT_EMPTY_INPUT
                                                       : SLOT_REQUEST;
    }
    for (size_t i = 0; i < COMMON_HEADER_COUNT; i++) {
        char key[5 + COMMON_HEADER_MAX_LEN];
        size_t n = strlen(common_headers[i]);
        if (header_slots[i].key != NULL || n > COMMON_HEADER_MAX_LEN)
            continue;
        header_key(key, common_headers[i], n);
        header_slots[i].key = shared_key(aTHX_ key, 5 + n);
        header_slots[i].kind = SLOT_REQUEST;
        /* Repeated fields join into one list (RFC 9110 5.3); cookies with "; ". */
        add_known_header(common_headers[i], &header_slots[i],
                         strcmp(common_headers[i], "Cookie") == 0 ? "; " : ", ");
    }
    add_known_header("Host", &request_slots[KEY_HTTP_HOST], ", ");
    add_known_header("Content-Type", &request_slots[KEY_CONTENT_TYPE], NULL);
    add_known_header("Content-Length", &request_slots[KEY_CONTENT_LENGTH], NULL);
    build_slot_table();
}

void serow_psgi_env_set_template(pTHX_ HV *template)
{
    /* The kept entries point at slots about to change. */
    forget_last_env(aTHX);
    for (size_t i = 0; i < constant_count; i++) {
        SvREFCNT_dec(constant_slots[i].key);
        SvREFCNT_dec(constant_slots[i].constant);
    }
    Safefree(constant_slots);
    constant_slots = NULL;
    constant_count = 0;
    if (template != NULL) {
        Newxz(constant_slots, HvUSEDKEYS(template) + 1, struct env_slot);
        hv_iterinit(template);
        HE *he;
        while ((he = hv_iternext(template)) != NULL) {
            I32 len;
            char *name = hv_iterkey(he, &len);
            struct env_slot *slot = &constant_slots[constant_count++];
            slot->key = shared_key(aTHX_ name, (size_t)len);
            slot->kind = SLOT_CONSTANT;
            slot->constant = newSVsv(hv_iterval(template, he));
        }
    }
    build_slot_table();
}

/* TLS: mod_ssl's SSL_* variables (tls_peer.c), new entries each request
 * (dropped when the env is reused, as any key without a slot). */
static __attribute__((noinline)) void store_tls_vars(pTHX_ HV *env,
                                                     const struct serow_connection_state *cs)
{
    struct serow_tls_var vars[SEROW_TLS_VARS_MAX];
    char scratch[32];
    size_t n = serow_tls_env_vars(cs, vars, scratch);
    for (size_t i = 0; i < n; i++)
        (void)hv_store(env, vars[i].name, (I32)vars[i].name_len,
                       newSVpvn(vars[i].value, vars[i].len), 0);
}

/* PATH_INFO is the decoded path; a '%' not followed by two hex digits stays. */
static void set_decoded_path(pTHX_ SV *sv, const char *path, size_t len)
{
    set_bytes(aTHX_ sv, path, len);
    if (memchr(path, '%', len) == NULL)
        return;
    /* In place: the decoded path is never longer.  (Forced: a kept value
     * left as it was may share its buffer with a copy the app made.) */
    char *p = SvPV_force_nomg_nolen(sv);
    size_t n = serow_percent_decode(p, len);
    p[n] = '\0';
    SvCUR_set(sv, n);
}

/* psgix.io for req: the kept value (made unresolved again by
 * serow_psgi_env_retire) or a new one, lent for req. */
static void set_socket_handle(pTHX_ HV *env, struct serow_request *req)
{
    struct env_slot *slot = &request_slots[KEY_PSGIX_IO];
    SV *sv;
    if (slot->kept != NULL) {
        sv = slot_value(aTHX_ env, slot);
    } else {
        sv = newSViv(0);
        sv_magicext(sv, NULL, PERL_MAGIC_ext, &serow_socket_handle_vtbl, NULL, 0);
        store_new(aTHX_ env, slot, sv);
    }
    serow_socket_lend(aTHX_ req, sv);
}

/* Most names fit in a buffer on the stack; a longer one (the parser takes
 * any length within --max-header-size) gets one from the heap, so that no
 * field the parser accepted is left out of the env. */
#define HEADER_NAME_ON_STACK 256

/* Adds one request header as HTTP_NAME (or CONTENT_TYPE / CONTENT_LENGTH). */
static void store_header(pTHX_ HV *env, const struct http_header *h)
{
    char stack_buffer[5 + HEADER_NAME_ON_STACK];
    size_t n = h->name_len;

    const struct known_header *known = known_header(h->name, n);
    if (known != NULL) {
        struct env_slot *slot = known->slot;
        if (slot->generation == env_generation && known->separator != NULL) {
            sv_catpvn(slot->value, known->separator, 2);
            sv_catpvn(slot->value, h->value, h->value_len);
        } else {
            set_bytes(aTHX_ slot_value(aTHX_ env, slot), h->value, h->value_len);
        }
        return;
    }
    /* "X-Foo" and "X_Foo" would both become HTTP_X_FOO: a header with an
     * underscore could pass for one a proxy in front has checked or set.
     * Like nginx and Apache, drop it.  (No known header has one.) */
    if (memchr(h->name, '_', n) != NULL)
        return;
    char *name_buffer = stack_buffer;
    if (n > HEADER_NAME_ON_STACK)
        Newx(name_buffer, 5 + n, char);
    header_key(name_buffer, h->name, n);
    size_t len = 5 + n;
    U32 hash;
    PERL_HASH(hash, name_buffer, len);
    SV **existing =
        (SV **)hv_common_key_len(env, name_buffer, (I32)len, HV_FETCH_JUST_SV, NULL, hash);
    if (existing != NULL) {
        sv_catpvn(*existing, ", ", 2);
        sv_catpvn(*existing, h->value, h->value_len);
    } else {
        (void)hv_common_key_len(env, name_buffer, (I32)len,
                                HV_FETCH_ISSTORE | HV_FETCH_JUST_SV,
                                newSVpvn(h->value, h->value_len), hash);
    }
    if (name_buffer != stack_buffer)
        Safefree(name_buffer);
}

/* --request-id-header: the request's id is the header's value in the env,
 * whatever the client sent (nothing, one that was refused, several), and
 * psgix.request_id. */
static void store_request_id(pTHX_ HV *env, const struct serow_request *r)
{
    const struct worker_settings *s = serow_worker_loop_settings(r->worker);
    const char *name = s->request_id_header;
    size_t n = s->request_id_header_len;
    set_key_bytes(aTHX_ env, KEY_PSGIX_REQUEST_ID, r->id, r->id_len);
    const struct known_header *known = known_header(name, n);
    if (known != NULL) {
        set_bytes(aTHX_ slot_value(aTHX_ env, known->slot), r->id, r->id_len);
        return;
    }
    char key[5 + sizeof(s->request_id_header)];
    header_key(key, name, n);
    (void)hv_store(env, key, (I32)(5 + n), newSVpvn(r->id, r->id_len), 0);
}

HV *serow_build_psgi_env(pTHX_ struct serow_request *req)
{
    struct connection *conn = req->conn;
    const struct http_request_head *head = &req->head;
    int server_port = 0;
    const char *server_name = serow_worker_loop_listener(req->worker, conn->listener_index,
                                                         &server_port);
    HV *env;

    serow_psgi_env_retire(aTHX); /* (the Perl side calls it before waiting) */
    if (last_env != NULL) {
        env = last_env;
    } else {
        env = last_env = newHV();
        hv_ksplit(env, ENV_EXPECTED_KEYS);
    }
    last_env_ready = 0;
    env_generation++;

    /* Template values serow_psgi_env_retire kept (reset if the app changed them)
     * are marked as set for this build. */
    for (size_t i = 0; kept_constants < constant_count && i < constant_count; i++) {
        struct env_slot *slot = &constant_slots[i];
        if (slot->generation != env_generation)
            store_new(aTHX_ env, slot, copy_value(aTHX_ slot->constant));
    }
    kept_constants = 0;
    set_key_bytes(aTHX_ env, KEY_REQUEST_METHOD, head->method, head->method_len);
    set_key_bytes(aTHX_ env, KEY_SERVER_PROTOCOL, head->minor_version ? "HTTP/1.1" : "HTTP/1.0",
                  8);

    /* REQUEST_URI is origin-form even for an absolute-form target. */
    SV *request_uri = slot_value(aTHX_ env, &request_slots[KEY_REQUEST_URI]);
    if (head->path_len == 0 || head->path[0] == '?') {
        set_bytes(aTHX_ request_uri, "/", 1);
        sv_catpvn(request_uri, head->path, head->path_len);
    } else {
        set_bytes(aTHX_ request_uri, head->path, head->path_len);
    }
    const char *uri = SvPVX(request_uri);
    size_t uri_len = SvCUR(request_uri);
    const char *question = memchr(uri, '?', uri_len);
    size_t path_only = question ? (size_t)(question - uri) : uri_len;
    /* "OPTIONS *" asks about the server, not a path: PSGI wants PATH_INFO
     * empty or starting with "/"; REQUEST_URI keeps the "*". */
    SV *path_info = slot_value(aTHX_ env, &request_slots[KEY_PATH_INFO]);
    if (uri_len == 1 && uri[0] == '*')
        set_bytes(aTHX_ path_info, "", 0);
    else
        set_decoded_path(aTHX_ path_info, uri, path_only);
    if (question)
        set_key_bytes(aTHX_ env, KEY_QUERY_STRING, question + 1, uri_len - path_only - 1);
    else
        set_key_bytes(aTHX_ env, KEY_QUERY_STRING, "", 0);

    if (server_name == NULL)
        server_name = "";
    set_key_bytes(aTHX_ env, KEY_SERVER_NAME, server_name, strlen(server_name));
    set_integer(aTHX_ slot_value(aTHX_ env, &request_slots[KEY_SERVER_PORT]), server_port);
    set_key_bytes(aTHX_ env, KEY_REMOTE_ADDR, conn->remote_addr, strlen(conn->remote_addr));
    set_integer(aTHX_ slot_value(aTHX_ env, &request_slots[KEY_REMOTE_PORT]), conn->remote_port);

    /* TLS: the scheme is https, HTTPS on (as CGI servers set it); its
     * psgix.io is a handle on the plaintext (psgi_tls_socket.c).  (The
     * constant slot of psgi.url_scheme is reset for the next request, as
     * when an app changes it.) */
    if (__builtin_expect(conn->carried.transport == SEROW_TRANSPORT_TLS, 0)) {
        (void)hv_stores(env, "psgi.url_scheme", newSVpvs("https"));
        (void)hv_stores(env, "HTTPS", newSVpvs("on"));
        store_tls_vars(aTHX_ env, &conn->carried);
    }
    set_socket_handle(aTHX_ env, req);
    struct env_slot *cleanup = &request_slots[KEY_PSGIX_CLEANUP_HANDLERS];
    if (cleanup->kept != NULL) /* emptied by serow_psgi_env_retire */
        (void)slot_value(aTHX_ env, cleanup);
    else
        store_new(aTHX_ env, cleanup, newRV_noinc((SV *)newAV()));
    struct env_slot *input_slot = &request_slots[KEY_PSGI_INPUT];
    if (head->framing == HTTP_BODY_NONE) {
        SV *input = serow_input_empty(aTHX);
        if (input != NULL && input_slot->kept != NULL) /* the same handle */
            (void)slot_value(aTHX_ env, input_slot);
        else if (input != NULL)
            store_new(aTHX_ env, input_slot, newRV_inc(input));
    } else {
        SV *input = serow_input_filled(aTHX_ req);
        if (input != NULL && input_slot->kept != NULL) /* the empty handle's entry */
            sv_setrv_inc(slot_value(aTHX_ env, input_slot), input);
        else if (input != NULL)
            store_new(aTHX_ env, input_slot, newRV_inc(input));
    }

    for (size_t i = 0; i < head->num_headers; i++)
        store_header(aTHX_ env, &head->headers[i]);
    /* RFC 9112 3.2.2: an absolute-form target's authority is the host. */
    if (head->authority != NULL)
        set_key_bytes(aTHX_ env, KEY_HTTP_HOST, head->authority, head->authority_len);
    if (req->id_len)
        store_request_id(aTHX_ env, req);

    delete_unused_kept_entries(aTHX_ env);
    return env;
}
