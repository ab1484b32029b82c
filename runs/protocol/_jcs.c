/*
 * RFC 8785 (JCS) canonical JSON straight from JSON text, with JavaScript number semantics.
 *
 * canonicalize(data, members=None) -> CanonicalText
 * canonical_sha256(data, members=None) -> (hex digest, unsafe_integers, places)
 *
 * Parses the UTF-8 JSON text in `data` and writes its canonical form: no insignificant
 * whitespace, object members sorted by the UTF-16 code units of their keys (a repeated
 * key keeps its last value, as JSON.parse does), strings with JCS's minimal escaping,
 * numbers as ECMAScript's Number::toString writes the double they denote. With
 * `members` (a tuple of plain ASCII names) the text must hold an object and only those
 * top-level members are kept: the integrity input of a run bundle.
 *
 * The work runs with the GIL released and touches no Python object, so a caller can
 * parse the same text with orjson in another thread meanwhile. Text that is not JSON,
 * or has no canonical form (a non-finite number, a lone surrogate), raises ValueError:
 * the caller then reports the error from its own parser. UTF-8 validity is the
 * caller's parser's business too; bytes are copied through unchanged.
 *
 * canonicalize's result exposes the bytes through the buffer protocol (no copy) and says,
 * in `unsafe_integers`, whether the text held an integer beyond +-(2**53 - 1).
 * canonical_sha256 hashes (OpenSSL's libcrypto) the output as it goes, dropping it once
 * no open object can still reorder it: memory stays at the size of the largest object
 * outside arrays, not of the whole form. With `members`, the top-level members are
 * located first and written in key order.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <locale.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

/* Nested arrays and objects, the outermost included: canonical.MAX_NESTING, the deepest
 * document the tree path accepts. Deeper text is refused here and left to the tree path,
 * which refuses it with its own message. */
#define MAX_DEPTH 512
#define FLUSH_BYTES (1u << 18)
#define MAX_MEMBERS 16
#define MAX_PLACES 4096 /* where integers beyond 2**53 - 1 were seen; more means "anywhere" */

typedef struct {
    int member;   /* selected member (index in sorted order), -1 for any other text */
    long element; /* index in that member's array value, -1 when it is not an array */
} Place;

typedef struct {
    char *buf;
    size_t len;
    size_t cap;
} Out;

static locale_t c_locale = (locale_t)0; /* numbers are read and written the C way */

typedef struct {
    size_t start;   /* offset of the key's opening quote in out */
    size_t colon;   /* offset of the ':' after the key */
    size_t end;     /* offset just past the value */
} Member;

typedef struct {
    const unsigned char *p;
    const unsigned char *end;
    Out out;
    Out scratch;          /* reordering area */
    Member *members;      /* stack shared by all objects being parsed */
    size_t nmembers;
    size_t capmembers;
    Member *sortbuf;
    size_t capsort;
    int unsafe_integers;
    const char *error;
    size_t error_at;
    EVP_MD_CTX *sha;      /* when set, finished output is hashed and dropped as it comes */
    int open_objects;     /* objects being written (their text may still be reordered) */
    int member;           /* selected member being written, -1 otherwise */
    long element;         /* index in the member's array value being written, -1 otherwise */
    Place *places;        /* where unsafe integers were seen (consecutive repeats merged) */
    size_t nplaces;
    int places_overflow;
} Parser;

/* Notes an integer beyond +-(2**53 - 1) and where it is, so the caller can round just there. */
static void note_unsafe_integer(Parser *ps) {
    ps->unsafe_integers = 1;
    if (ps->nplaces > 0 && ps->places[ps->nplaces - 1].member == ps->member &&
        ps->places[ps->nplaces - 1].element == ps->element) {
        return;
    }
    if (ps->places == NULL && !ps->places_overflow) {
        ps->places = PyMem_RawMalloc(MAX_PLACES * sizeof(Place));
    }
    if (ps->places == NULL || ps->nplaces == MAX_PLACES) {
        ps->places_overflow = 1;
        return;
    }
    ps->places[ps->nplaces].member = ps->member;
    ps->places[ps->nplaces].element = ps->element;
    ps->nplaces++;
}

static int fail(Parser *ps, const char *message) {
    if (ps->error == NULL) {
        ps->error = message;
        ps->error_at = 0;
    }
    return -1;
}

static int out_reserve(Parser *ps, Out *o, size_t n) {
    if (o->cap - o->len >= n) {
        return 0;
    }
    size_t cap = o->cap ? o->cap : 4096;
    while (cap - o->len < n) {
        if (cap > ((size_t)-1) / 2) {
            return fail(ps, "out of memory");
        }
        cap *= 2;
    }
    char *grown = PyMem_RawRealloc(o->buf, cap);
    if (grown == NULL) {
        return fail(ps, "out of memory");
    }
    o->buf = grown;
    o->cap = cap;
    return 0;
}

static inline int put(Parser *ps, const void *data, size_t n) {
    if (out_reserve(ps, &ps->out, n) < 0) {
        return -1;
    }
    memcpy(ps->out.buf + ps->out.len, data, n);
    ps->out.len += n;
    return 0;
}

static inline int put_char(Parser *ps, char c) {
    if (ps->out.len == ps->out.cap && out_reserve(ps, &ps->out, 1) < 0) {
        return -1;
    }
    ps->out.buf[ps->out.len++] = c;
    return 0;
}

static inline void skip_ws(Parser *ps) {
    const unsigned char *p = ps->p;
    while (p < ps->end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) {
        p++;
    }
    ps->p = p;
}

/* ---------------------------------------------------------------- strings */

static int put_escaped_codepoint(Parser *ps, uint32_t cp) {
    char tmp[8];
    size_t n = 0;
    if (cp == '"') {
        return put(ps, "\\\"", 2);
    }
    if (cp == '\\') {
        return put(ps, "\\\\", 2);
    }
    if (cp < 0x20) {
        switch (cp) {
        case '\b': return put(ps, "\\b", 2);
        case '\t': return put(ps, "\\t", 2);
        case '\n': return put(ps, "\\n", 2);
        case '\f': return put(ps, "\\f", 2);
        case '\r': return put(ps, "\\r", 2);
        default:
            n = (size_t)snprintf(tmp, sizeof tmp, "\\u%04x", (unsigned)cp);
            return put(ps, tmp, n);
        }
    }
    if (cp < 0x80) {
        tmp[n++] = (char)cp;
    } else if (cp < 0x800) {
        tmp[n++] = (char)(0xC0 | (cp >> 6));
        tmp[n++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        tmp[n++] = (char)(0xE0 | (cp >> 12));
        tmp[n++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        tmp[n++] = (char)(0x80 | (cp & 0x3F));
    } else {
        tmp[n++] = (char)(0xF0 | (cp >> 18));
        tmp[n++] = (char)(0x80 | ((cp >> 12) & 0x3F));
        tmp[n++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        tmp[n++] = (char)(0x80 | (cp & 0x3F));
    }
    return put(ps, tmp, n);
}

static int hex4(const unsigned char *p, uint32_t *value) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') {
            v |= (uint32_t)(c - '0');
        } else if (c >= 'a' && c <= 'f') {
            v |= (uint32_t)(c - 'a' + 10);
        } else if (c >= 'A' && c <= 'F') {
            v |= (uint32_t)(c - 'A' + 10);
        } else {
            return -1;
        }
    }
    *value = v;
    return 0;
}

/* Whether any of the 8 bytes is a quote, a backslash or a control character (exact as a
 * yes/no: the classic has-zero-byte and has-byte-less-than tests). */
static inline int has_string_special(const unsigned char *p) {
    const uint64_t ones = 0x0101010101010101ULL;
    const uint64_t highs = 0x8080808080808080ULL;
    uint64_t v;
    memcpy(&v, p, 8);
    uint64_t quote = v ^ (ones * '"');
    uint64_t backslash = v ^ (ones * '\\');
    uint64_t found = ((quote - ones) & ~quote) | ((backslash - ones) & ~backslash) | ((v - ones * 0x20) & ~v);
    return (found & highs) != 0;
}

/* ps->p is on the opening quote. Writes the canonical string. */
static int parse_string(Parser *ps) {
    const unsigned char *p = ps->p + 1;
    const unsigned char *end = ps->end;
    if (put_char(ps, '"') < 0) {
        return -1;
    }
    for (;;) {
        const unsigned char *run = p;
        while (end - p >= 8 && !has_string_special(p)) {
            p += 8;
        }
        while (p < end && *p != '"' && *p != '\\' && *p >= 0x20) {
            p++;
        }
        if (p > run && put(ps, run, (size_t)(p - run)) < 0) {
            return -1;
        }
        if (p >= end) {
            return fail(ps, "unterminated string");
        }
        if (*p == '"') {
            ps->p = p + 1;
            return put_char(ps, '"');
        }
        if (*p < 0x20) {
            return fail(ps, "control character in string");
        }
        /* escape */
        if (end - p < 2) {
            return fail(ps, "unterminated escape");
        }
        unsigned char e = p[1];
        uint32_t cp;
        switch (e) {
        case '"': cp = '"'; p += 2; break;
        case '\\': cp = '\\'; p += 2; break;
        case '/': cp = '/'; p += 2; break;
        case 'b': cp = '\b'; p += 2; break;
        case 'f': cp = '\f'; p += 2; break;
        case 'n': cp = '\n'; p += 2; break;
        case 'r': cp = '\r'; p += 2; break;
        case 't': cp = '\t'; p += 2; break;
        case 'u':
            if (end - p < 6 || hex4(p + 2, &cp) < 0) {
                return fail(ps, "bad \\u escape");
            }
            p += 6;
            if (cp >= 0xDC00 && cp <= 0xDFFF) {
                return fail(ps, "lone surrogate");
            }
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                uint32_t low;
                if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || hex4(p + 2, &low) < 0 ||
                    low < 0xDC00 || low > 0xDFFF) {
                    return fail(ps, "lone surrogate");
                }
                p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            }
            break;
        default:
            return fail(ps, "bad escape");
        }
        if (put_escaped_codepoint(ps, cp) < 0) {
            return -1;
        }
    }
}

/* ---------------------------------------------------------------- numbers */

/* Writes ECMAScript's Number::toString of 0.<digits> * 10**n (digits: k >= 1 significant
 * digits, no leading or trailing zeros). */
static int put_js_number(Parser *ps, int negative, const char *digits, int k, int n) {
    char tmp[64];
    size_t len = 0;
    if (negative) {
        tmp[len++] = '-';
    }
    if (k <= n && n <= 21) {
        memcpy(tmp + len, digits, (size_t)k);
        len += (size_t)k;
        memset(tmp + len, '0', (size_t)(n - k));
        len += (size_t)(n - k);
    } else if (0 < n && n <= 21) {
        memcpy(tmp + len, digits, (size_t)n);
        len += (size_t)n;
        tmp[len++] = '.';
        memcpy(tmp + len, digits + n, (size_t)(k - n));
        len += (size_t)(k - n);
    } else if (-6 < n && n <= 0) {
        tmp[len++] = '0';
        tmp[len++] = '.';
        memset(tmp + len, '0', (size_t)(-n));
        len += (size_t)(-n);
        memcpy(tmp + len, digits, (size_t)k);
        len += (size_t)k;
    } else {
        int e = n - 1;
        tmp[len++] = digits[0];
        if (k > 1) {
            tmp[len++] = '.';
            memcpy(tmp + len, digits + 1, (size_t)(k - 1));
            len += (size_t)(k - 1);
        }
        len += (size_t)snprintf(tmp + len, sizeof tmp - len, "e%c%d", e >= 0 ? '+' : '-', e >= 0 ? e : -e);
    }
    return put(ps, tmp, len);
}

/* Shortest digits of a finite non-zero double that read back as it, the closest such
 * when there are several (what repr() and JavaScript print): the correctly rounded
 * 15-, 16- or 17-digit form, whichever is the first to round-trip. A double that some
 * decimal of at most 15 digits denotes is denoted by its 15-digit rounding (DBL_DIG).
 * At a power of two the doubles below are twice as close as those above: when the
 * rounding falls below and does not read back, the next decimal up may (2**-24 is
 * 5.960464477539063e-8, not ...062e-8 nor the 17 digits ...0625e-8). */
static int shortest_digits(Parser *ps, double value, char *digits, int *k, int *n) {
    char text[40];
    char check[48];
    int binary_exponent;
    int power_of_two = frexp(value, &binary_exponent) == 0.5;
    /* below DBL_MIN fewer digits are exact: search from one digit up */
    for (int precision = value < 2.2250738585072014e-308 ? 1 : 15; precision <= 17; precision++) {
        /* "d.ddde+XX"; the decimal point may follow the locale, so take digits only */
        snprintf(text, sizeof text, "%.*e", precision - 1, value);
        const char *t = text;
        int count = 0;
        while (*t && *t != 'e') {
            if (*t >= '0' && *t <= '9') {
                digits[count++] = *t;
            }
            t++;
        }
        if (*t != 'e' || count == 0) {
            return fail(ps, "cannot format number");
        }
        int exponent = atoi(t + 1);
        for (int attempt = 0; attempt < 2; attempt++) {
            int c = snprintf(check, sizeof check, "%c.%.*se%d", digits[0], count - 1, digits + 1, exponent);
            if (c <= 0 || (size_t)c >= sizeof check) {
                return fail(ps, "cannot format number");
            }
            double back = strtod_l(check, NULL, c_locale);
            if (precision == 17 || back == value) {
                while (count > 1 && digits[count - 1] == '0') {
                    count--;
                }
                *k = count;
                *n = exponent + 1;
                return 0;
            }
            if (attempt > 0 || !power_of_two || back > value) {
                break;
            }
            /* one unit up in the last digit, carrying */
            int i = count - 1;
            while (i >= 0 && digits[i] == '9') {
                digits[i--] = '0';
            }
            if (i < 0) {
                digits[0] = '1';
                exponent++;
            } else {
                digits[i]++;
            }
        }
    }
    return fail(ps, "cannot format number");
}

/* ---- exact checks of a 16- or 17-digit token against the double it denotes
 *
 * A token written by JSON.stringify or repr() already holds the digits JavaScript prints:
 * no shorter decimal reads back as the double, and none of its length lies closer. Both
 * are checked exactly with 128-bit integers; when a product would not fit (extreme
 * exponents) or a comparison ties, the caller formats the double itself. */

typedef unsigned __int128 u128;

static const uint64_t POW5[28] = {
    1ULL, 5ULL, 25ULL, 125ULL, 625ULL, 3125ULL, 15625ULL, 78125ULL, 390625ULL, 1953125ULL,
    9765625ULL, 48828125ULL, 244140625ULL, 1220703125ULL, 6103515625ULL, 30517578125ULL,
    152587890625ULL, 762939453125ULL, 3814697265625ULL, 19073486328125ULL, 95367431640625ULL,
    476837158203125ULL, 2384185791015625ULL, 11920928955078125ULL, 59604644775390625ULL,
    298023223876953125ULL, 1490116119384765625ULL, 7450580596923828125ULL,
};

static int mul_pow5(u128 *x, long p) {
    while (p > 0) {
        long step = p < 27 ? p : 27;
        uint64_t factor = POW5[step];
        if (*x > ((u128)-1) / factor) {
            return 0;
        }
        *x *= factor;
        p -= step;
    }
    return 1;
}

static int shift_left(u128 *x, long s) {
    if (s == 0 || *x == 0) {
        return 1;
    }
    if (s >= 127 || (*x >> (127 - s)) != 0) {
        return 0;
    }
    *x <<= s;
    return 1;
}

/* Sign of a * 10**q - b * 2**e: -1, 0 or 1; 2 when it does not fit in 128 bits. */
static int compare_scaled(uint64_t a, long q, uint64_t b, long e) {
    u128 left = a;
    u128 right = b;
    if (!(q >= 0 ? mul_pow5(&left, q) : mul_pow5(&right, -q))) {
        return 2;
    }
    long z = e - q; /* 10**q = 5**q * 2**q: the powers of two left over */
    if (!(z >= 0 ? shift_left(&right, z) : shift_left(&left, -z))) {
        return 2;
    }
    return left < right ? -1 : (left > right ? 1 : 0);
}

/* Whether the decimal c * 10**q reads back as the double m * 2**e (round half to even). */
static int reads_back(uint64_t c, long q, uint64_t m, long e) {
    /* the double's interval: halfway to each neighbour; below a power of two the
     * neighbour is twice as close */
    int power_of_two = m == (1ULL << 52) && e > -1074;
    int low = power_of_two ? compare_scaled(c, q, 4 * m - 1, e - 2) : compare_scaled(c, q, 2 * m - 1, e - 1);
    int high = compare_scaled(c, q, 2 * m + 1, e - 1);
    if (low == 2 || high == 2) {
        return -1; /* unknown */
    }
    int even = (m & 1) == 0;
    return (low > 0 || (low == 0 && even)) && (high < 0 || (high == 0 && even));
}

/* Whether the k significant digits (0.<digits> * 10**n, k = 16 or 17) of a token that
 * reads as `value` (finite, > 0) are what JavaScript prints for it. */
static int digits_are_javascripts(const char *digits, int k, long n, double value) {
    int binary_exponent;
    double fraction = frexp(value, &binary_exponent);
    uint64_t m = (uint64_t)ldexp(fraction, 53);
    long e = (long)binary_exponent - 53;
    if (e < -1074) { /* subnormal: m * 2**e with e = -1074 */
        m >>= -1074 - e;
        e = -1074;
    }
    uint64_t number = 0;
    for (int i = 0; i < k; i++) {
        number = number * 10 + (uint64_t)(digits[i] - '0');
    }
    long q = n - k;
    /* no decimal with k - 1 digits reads back: neither neighbour of the token on that grid */
    uint64_t below = number / 10;
    int r1 = reads_back(below, q + 1, m, e);
    int r2 = reads_back(below + 1, q + 1, m, e);
    if (r1 != 0 || r2 != 0) {
        return 0; /* shorter (or unknown) */
    }
    /* closest of its length: strictly within half a unit of the last digit */
    int c1 = compare_scaled(2 * number - 1, q, m, e + 1);
    int c2 = compare_scaled(2 * number + 1, q, m, e + 1);
    return c1 == -1 && c2 == 1;
}

static int parse_number(Parser *ps) {
    const unsigned char *start = ps->p;
    const unsigned char *p = start;
    const unsigned char *end = ps->end;
    int negative = 0;
    if (p < end && *p == '-') {
        negative = 1;
        p++;
    }
    const unsigned char *int_start = p;
    if (p < end && *p == '0') {
        p++;
    } else if (p < end && *p >= '1' && *p <= '9') {
        while (p < end && *p >= '0' && *p <= '9') {
            p++;
        }
    } else {
        return fail(ps, "bad number");
    }
    const unsigned char *int_end = p;
    const unsigned char *frac_start = p;
    const unsigned char *frac_end = p;
    int is_integer = 1;
    if (p < end && *p == '.') {
        is_integer = 0;
        p++;
        frac_start = p;
        while (p < end && *p >= '0' && *p <= '9') {
            p++;
        }
        frac_end = p;
        if (frac_end == frac_start) {
            return fail(ps, "bad number");
        }
    }
    long exponent = 0;
    int exponent_huge = 0;
    if (p < end && (*p == 'e' || *p == 'E')) {
        is_integer = 0;
        p++;
        int exp_negative = 0;
        if (p < end && (*p == '+' || *p == '-')) {
            exp_negative = *p == '-';
            p++;
        }
        const unsigned char *exp_start = p;
        while (p < end && *p >= '0' && *p <= '9') {
            if (exponent < 100000) {
                exponent = exponent * 10 + (*p - '0');
            } else {
                exponent_huge = 1;
            }
            p++;
        }
        if (p == exp_start) {
            return fail(ps, "bad number");
        }
        if (exp_negative) {
            exponent = -exponent;
        }
    }
    ps->p = p;

    /* Significant digits: integer and fraction digits without leading/trailing zeros. */
    char digits[40];
    int k = 0;
    int total = 0;      /* significant digits seen, including the ones beyond the buffer */
    int n = 0;          /* value = 0.<digits> * 10**n */
    int leading = 1;
    for (const unsigned char *q = int_start; q < int_end; q++) {
        if (leading && *q == '0') {
            continue;
        }
        leading = 0;
        if (total < (int)sizeof digits) {
            digits[total] = (char)*q;
        }
        total++;
    }
    n = total; /* every integer digit after the first non-zero one counts */
    for (const unsigned char *q = frac_start; q < frac_end; q++) {
        if (leading && *q == '0') {
            n--;
            continue;
        }
        leading = 0;
        if (total < (int)sizeof digits) {
            digits[total] = (char)*q;
        }
        total++;
    }
    if (total == 0) {
        return put_char(ps, '0'); /* zero, -0 and 0e999 alike */
    }
    /* trailing zeros are not significant */
    int significant = total;
    if (significant <= (int)sizeof digits) {
        while (significant > 1 && digits[significant - 1] == '0') {
            significant--;
        }
        k = significant;
    }
    long decimal_exponent = n + exponent;

    if (is_integer && total >= 16 &&
        (total > 16 || memcmp(digits, "9007199254740991", 16) > 0)) {
        note_unsafe_integer(ps); /* JavaScript reads it as the nearest double */
    }
    if (!exponent_huge && total <= (int)sizeof digits && k <= 15 && decimal_exponent > -290 &&
        decimal_exponent < 290) {
        /* at most 15 significant digits: exactly the shortest digits of the double */
        return put_js_number(ps, negative, digits, k, (int)decimal_exponent);
    }

    /* general case: the correctly rounded double, then its shortest digits */
    size_t length = (size_t)(p - start);
    char stack_text[128];
    char *text = length < sizeof stack_text ? stack_text : PyMem_RawMalloc(length + 1);
    if (text == NULL) {
        return fail(ps, "out of memory");
    }
    memcpy(text, start, length);
    text[length] = '\0';
    double value = strtod_l(text, NULL, c_locale);
    if (text != stack_text) {
        PyMem_RawFree(text);
    }
    if (!isfinite(value)) {
        return fail(ps, "number is not finite");
    }
    if (value == 0) {
        return put_char(ps, '0');
    }
    if (!exponent_huge && (k == 16 || k == 17) && total <= (int)sizeof digits &&
        digits_are_javascripts(digits, k, decimal_exponent, fabs(value))) {
        return put_js_number(ps, negative, digits, k, (int)decimal_exponent); /* repr/JS wrote it */
    }
    char shortest[24];
    int sk;
    int sn;
    if (shortest_digits(ps, fabs(value), shortest, &sk, &sn) < 0) {
        return -1;
    }
    return put_js_number(ps, value < 0, shortest, sk, sn);
}

/* ---------------------------------------------------------------- key order */

/* Next code point of a canonical key text (UTF-8 with JCS escapes), as a weight whose
 * order is UTF-16 code unit order: U+0000..U+D7FF, then the astral planes, then
 * U+E000..U+FFFF. Bytes that are not UTF-8 weigh as themselves (the text is refused
 * by the caller's parser anyway). */
static uint32_t next_weight(const unsigned char **pp, const unsigned char *end) {
    const unsigned char *p = *pp;
    uint32_t c = *p++;
    uint32_t cp = c;
    if (c == '\\' && p < end) {
        unsigned char e = *p++;
        switch (e) {
        case 'b': cp = '\b'; break;
        case 't': cp = '\t'; break;
        case 'n': cp = '\n'; break;
        case 'f': cp = '\f'; break;
        case 'r': cp = '\r'; break;
        case 'u':
            if (end - p >= 4 && hex4(p, &cp) == 0) {
                p += 4;
            }
            break;
        default: cp = e; break; /* \" and \\ */
        }
    } else if (c >= 0xF0 && end - p >= 3) {
        cp = ((c & 0x07) << 18) | ((uint32_t)(p[0] & 0x3F) << 12) | ((uint32_t)(p[1] & 0x3F) << 6) |
             (p[2] & 0x3F);
        p += 3;
    } else if (c >= 0xE0 && end - p >= 2) {
        cp = ((c & 0x0F) << 12) | ((uint32_t)(p[0] & 0x3F) << 6) | (p[1] & 0x3F);
        p += 2;
    } else if (c >= 0xC0 && end - p >= 1) {
        cp = ((c & 0x1F) << 6) | (p[0] & 0x3F);
        p += 1;
    }
    *pp = p;
    if (cp < 0xD800) {
        return cp;
    }
    if (cp >= 0x10000) {
        return 0xD800 + (cp - 0x10000);
    }
    return 0x10D800 + cp; /* U+E000..U+FFFF after every astral character */
}

static int compare_keys(const char *base, const Member *a, const Member *b) {
    /* keys are the text between the quotes */
    const unsigned char *pa = (const unsigned char *)base + a->start + 1;
    const unsigned char *ea = (const unsigned char *)base + a->colon - 1;
    const unsigned char *pb = (const unsigned char *)base + b->start + 1;
    const unsigned char *eb = (const unsigned char *)base + b->colon - 1;
    /* shared plain prefix */
    while (pa < ea && pb < eb && *pa == *pb && *pa < 0x80 && *pa != '\\') {
        pa++;
        pb++;
    }
    while (pa < ea && pb < eb) {
        uint32_t wa = next_weight(&pa, ea);
        uint32_t wb = next_weight(&pb, eb);
        if (wa != wb) {
            return wa < wb ? -1 : 1;
        }
    }
    if (pa < ea) {
        return 1;
    }
    if (pb < eb) {
        return -1;
    }
    return 0;
}

/* Stable merge sort of members by key. */
static void merge_sort(const char *base, Member *items, Member *tmp, size_t count) {
    if (count < 12) {
        for (size_t i = 1; i < count; i++) {
            Member item = items[i];
            size_t j = i;
            while (j > 0 && compare_keys(base, &items[j - 1], &item) > 0) {
                items[j] = items[j - 1];
                j--;
            }
            items[j] = item;
        }
        return;
    }
    size_t half = count / 2;
    merge_sort(base, items, tmp, half);
    merge_sort(base, items + half, tmp, count - half);
    size_t i = 0, j = half, o = 0;
    while (i < half && j < count) {
        if (compare_keys(base, &items[j], &items[i]) < 0) {
            tmp[o++] = items[j++];
        } else {
            tmp[o++] = items[i++];
        }
    }
    while (i < half) {
        tmp[o++] = items[i++];
    }
    while (j < count) {
        tmp[o++] = items[j++];
    }
    memcpy(items, tmp, count * sizeof(Member));
}

/* ---------------------------------------------------------------- values */

static int parse_value(Parser *ps, int depth);

/* Hash and drop the output written so far, unless an open object may still reorder it. */
static int flush(Parser *ps) {
    if (ps->sha == NULL || ps->open_objects > 0) {
        return 0;
    }
    if (ps->out.len > 0 && EVP_DigestUpdate(ps->sha, ps->out.buf, ps->out.len) != 1) {
        return fail(ps, "sha256 failed");
    }
    ps->out.len = 0;
    return 0;
}

static int push_member(Parser *ps, Member m) {
    if (ps->nmembers == ps->capmembers) {
        size_t cap = ps->capmembers ? ps->capmembers * 2 : 256;
        Member *grown = PyMem_RawRealloc(ps->members, cap * sizeof(Member));
        if (grown == NULL) {
            return fail(ps, "out of memory");
        }
        ps->members = grown;
        ps->capmembers = cap;
    }
    ps->members[ps->nmembers++] = m;
    return 0;
}

/* Members are written in input order, comma-separated; then, unless already in order
 * without repeats, the object's text is rebuilt in key order from a copy. */
static int parse_object(Parser *ps, int depth) {
    size_t object_start = ps->out.len;
    size_t first = ps->nmembers;
    if (put_char(ps, '{') < 0) {
        return -1;
    }
    ps->p++;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == '}') {
        ps->p++;
        return put_char(ps, '}');
    }
    ps->open_objects++;
    int ordered = 1;
    for (;;) {
        skip_ws(ps);
        if (ps->p >= ps->end || *ps->p != '"') {
            return fail(ps, "expected a key");
        }
        size_t count = ps->nmembers - first;
        if (count > 0 && put_char(ps, ',') < 0) {
            return -1;
        }
        Member m;
        m.start = ps->out.len;
        if (parse_string(ps) < 0) {
            return -1;
        }
        m.colon = ps->out.len;
        skip_ws(ps);
        if (ps->p >= ps->end || *ps->p != ':') {
            return fail(ps, "expected ':'");
        }
        ps->p++;
        if (put_char(ps, ':') < 0) {
            return -1;
        }
        skip_ws(ps);
        if (parse_value(ps, depth) < 0) {
            return -1;
        }
        m.end = ps->out.len;
        if (count > 0 && ordered && compare_keys(ps->out.buf, &ps->members[ps->nmembers - 1], &m) >= 0) {
            ordered = 0;
        }
        if (push_member(ps, m) < 0) {
            return -1;
        }
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == '}') {
            ps->p++;
            break;
        }
        return fail(ps, "expected ',' or '}'");
    }
    size_t count = ps->nmembers - first;
    if (!ordered) {
        /* copy the members' text aside, sort them (stable) there, keep the last of equal
         * keys and write them back in order */
        Member *items = ps->members + first;
        if (ps->capsort < count) {
            Member *grown = PyMem_RawRealloc(ps->sortbuf, count * sizeof(Member));
            if (grown == NULL) {
                return fail(ps, "out of memory");
            }
            ps->sortbuf = grown;
            ps->capsort = count;
        }
        size_t body_start = object_start + 1;
        size_t body_length = ps->out.len - body_start;
        ps->scratch.len = 0;
        if (out_reserve(ps, &ps->scratch, body_length) < 0) {
            return -1;
        }
        memcpy(ps->scratch.buf, ps->out.buf + body_start, body_length);
        for (size_t i = 0; i < count; i++) {
            items[i].start -= body_start;
            items[i].colon -= body_start;
            items[i].end -= body_start;
        }
        const char *copy = ps->scratch.buf;
        merge_sort(copy, items, ps->sortbuf, count);
        size_t w = body_start;
        int written = 0;
        for (size_t i = 0; i < count; i++) {
            if (i + 1 < count && compare_keys(copy, &items[i], &items[i + 1]) == 0) {
                continue; /* a later member has the same key */
            }
            if (written) {
                ps->out.buf[w++] = ',';
            }
            size_t length = items[i].end - items[i].start;
            memcpy(ps->out.buf + w, copy + items[i].start, length);
            w += length;
            written = 1;
        }
        ps->out.len = w;
    }
    ps->nmembers = first;
    ps->open_objects--;
    return put_char(ps, '}');
}

static int parse_array(Parser *ps, int depth) {
    if (put_char(ps, '[') < 0) {
        return -1;
    }
    ps->p++;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == ']') {
        ps->p++;
        return put_char(ps, ']');
    }
    int track = depth == 2 && ps->member >= 0; /* a selected member's array: number its items */
    for (long index = 0;; index++) {
        skip_ws(ps);
        if (track) {
            ps->element = index;
        }
        if (parse_value(ps, depth) < 0) {
            return -1;
        }
        if (ps->out.len >= FLUSH_BYTES && flush(ps) < 0) {
            return -1;
        }
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            if (put_char(ps, ',') < 0) {
                return -1;
            }
            continue;
        }
        if (ps->p < ps->end && *ps->p == ']') {
            ps->p++;
            if (track) {
                ps->element = -1;
            }
            return put_char(ps, ']');
        }
        return fail(ps, "expected ',' or ']'");
    }
}

static int literal(Parser *ps, const char *word, size_t length) {
    if ((size_t)(ps->end - ps->p) < length || memcmp(ps->p, word, length) != 0) {
        return fail(ps, "unexpected character");
    }
    ps->p += length;
    return put(ps, word, length);
}

static int parse_value(Parser *ps, int depth) {
    if (ps->p >= ps->end) {
        return fail(ps, "unexpected end of text");
    }
    switch (*ps->p) {
    case '{':
        if (depth >= MAX_DEPTH) {
            return fail(ps, "nested too deeply");
        }
        return parse_object(ps, depth + 1);
    case '[':
        if (depth >= MAX_DEPTH) {
            return fail(ps, "nested too deeply");
        }
        return parse_array(ps, depth + 1);
    case '"':
        return parse_string(ps);
    case 't':
        return literal(ps, "true", 4);
    case 'f':
        return literal(ps, "false", 5);
    case 'n':
        return literal(ps, "null", 4);
    default:
        return parse_number(ps);
    }
}


/* ---------------------------------------------------------------- top-level members */

/* Past the string whose opening quote is at p: the next quote not escaped by an odd run of
 * backslashes (memchr finds the candidates). NULL if the text ends first. */
static const unsigned char *string_end(const unsigned char *p, const unsigned char *end) {
    const unsigned char *content = p + 1;
    const unsigned char *from = content;
    for (;;) {
        const unsigned char *quote = memchr(from, '"', (size_t)(end - from));
        if (quote == NULL) {
            return NULL;
        }
        size_t backslashes = 0;
        while (quote - backslashes > content && quote[-1 - (ptrdiff_t)backslashes] == '\\') {
            backslashes++;
        }
        if (backslashes % 2 == 0) {
            return quote + 1;
        }
        from = quote + 1;
    }
}

/* Byte classes for skipping: 1 quote, 2 opening bracket, 3 closing bracket. */
static unsigned char skip_class[256];

/* Steps over a selected member's value (its text is checked when it is written). */
static int skip_value(Parser *ps) {
    const unsigned char *p = ps->p;
    const unsigned char *end = ps->end;
    if (p >= end) {
        return fail(ps, "unexpected end of text");
    }
    if (*p == '"' || *p == '{' || *p == '[') {
        size_t depth = 0;
        while (p < end) {
            unsigned char kind = skip_class[*p];
            if (kind == 0) {
                p++;
                continue;
            }
            if (kind == 1) {
                p = string_end(p, end);
                if (p == NULL) {
                    ps->p = end;
                    return fail(ps, "unterminated string");
                }
                if (depth == 0) {
                    ps->p = p;
                    return 0;
                }
                continue;
            }
            if (kind == 2) {
                depth++;
            } else if (--depth == 0) {
                ps->p = p + 1;
                return 0;
            }
            p++;
        }
        ps->p = end;
        return fail(ps, "unterminated value");
    }
    while (p < end && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\n' && *p != '\r' &&
           *p != '\t') {
        p++;
    }
    ps->p = p;
    return 0;
}

/* Checks one value without keeping its canonical text (nothing is hashed meanwhile):
 * members that are not written, and the earlier values of a repeated member, must be
 * JSON too, and their integers count for `unsafe_integers`. */
static int check_value(Parser *ps) {
    size_t mark = ps->out.len;
    ps->open_objects++;
    int status = parse_value(ps, 1);
    ps->open_objects--;
    ps->out.len = mark;
    return status;
}

typedef struct {
    const char *name;     /* plain ASCII name */
    size_t length;
    const unsigned char *start; /* the value's text, when the member is present */
    const unsigned char *end;
} Selected;

/* The object holding only the selected top-level members of the text's object, in key
 * order (names are ASCII, so byte order is UTF-16 order). A repeated member keeps its
 * last value. Members are located first, then written one by one, so output flushes. */
static int parse_selected(Parser *ps, Selected *selected, size_t count) {
    skip_ws(ps);
    if (ps->p >= ps->end || *ps->p != '{') {
        return fail(ps, "expected an object");
    }
    ps->p++;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == '}') {
        ps->p++;
    } else {
        for (;;) {
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != '"') {
                return fail(ps, "expected a key");
            }
            size_t key_start = ps->out.len;
            if (parse_string(ps) < 0) {
                return -1;
            }
            const char *key = ps->out.buf + key_start + 1;
            size_t key_length = ps->out.len - key_start - 2;
            Selected *hit = NULL;
            for (size_t i = 0; i < count; i++) {
                if (selected[i].length == key_length && memcmp(selected[i].name, key, key_length) == 0) {
                    hit = &selected[i];
                }
            }
            ps->out.len = key_start;
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') {
                return fail(ps, "expected ':'");
            }
            ps->p++;
            skip_ws(ps);
            if (hit == NULL) {
                if (check_value(ps) < 0) {
                    return -1;
                }
            } else {
                if (hit->start != NULL) { /* repeated: the earlier value is dropped, check it */
                    const unsigned char *resume = ps->p;
                    const unsigned char *text_end = ps->end;
                    ps->p = hit->start;
                    ps->end = hit->end;
                    if (check_value(ps) < 0) {
                        return -1;
                    }
                    if (ps->p != ps->end) {
                        return fail(ps, "extra data in a member");
                    }
                    ps->p = resume;
                    ps->end = text_end;
                }
                const unsigned char *value_start = ps->p;
                if (skip_value(ps) < 0) {
                    return -1;
                }
                hit->start = value_start;
                hit->end = ps->p;
            }
            skip_ws(ps);
            if (ps->p < ps->end && *ps->p == ',') {
                ps->p++;
                continue;
            }
            if (ps->p < ps->end && *ps->p == '}') {
                ps->p++;
                break;
            }
            return fail(ps, "expected ',' or '}'");
        }
    }
    skip_ws(ps);
    if (ps->p != ps->end) {
        return fail(ps, "extra data after the value");
    }
    const unsigned char *text_end = ps->end;
    if (put_char(ps, '{') < 0) {
        return -1;
    }
    int written = 0;
    for (size_t i = 0; i < count; i++) {
        if (selected[i].start == NULL) {
            continue;
        }
        if ((written && put_char(ps, ',') < 0) || put_char(ps, '"') < 0 ||
            put(ps, selected[i].name, selected[i].length) < 0 || put(ps, "\":", 2) < 0) {
            return -1;
        }
        ps->p = selected[i].start;
        ps->end = selected[i].end;
        ps->member = (int)i;
        ps->element = -1;
        if (parse_value(ps, 1) < 0) {
            return -1;
        }
        ps->member = -1;
        if (ps->p != ps->end) {
            return fail(ps, "extra data in a member");
        }
        if (flush(ps) < 0) {
            return -1;
        }
        written = 1;
    }
    ps->p = ps->end = text_end;
    return put_char(ps, '}');
}

/* ---------------------------------------------------------------- result type */

typedef struct {
    PyObject_HEAD
    char *buf;
    Py_ssize_t len;
    int unsafe_integers;
} CanonicalText;

static void CanonicalText_dealloc(CanonicalText *self) {
    PyMem_RawFree(self->buf);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int CanonicalText_getbuffer(CanonicalText *self, Py_buffer *view, int flags) {
    return PyBuffer_FillInfo(view, (PyObject *)self, self->buf, self->len, 1, flags);
}

static Py_ssize_t CanonicalText_length(CanonicalText *self) {
    return self->len;
}

static PyObject *CanonicalText_get_unsafe(CanonicalText *self, void *closure) {
    (void)closure;
    return PyBool_FromLong(self->unsafe_integers);
}

static PyBufferProcs CanonicalText_as_buffer = {
    (getbufferproc)CanonicalText_getbuffer,
    NULL, /* the view holds a reference; nothing else to release */
};

static PySequenceMethods CanonicalText_as_sequence = {
    .sq_length = (lenfunc)CanonicalText_length,
};

static PyGetSetDef CanonicalText_getset[] = {
    {"unsafe_integers", (getter)CanonicalText_get_unsafe, NULL,
     "whether the text held an integer beyond +-(2**53 - 1)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject CanonicalTextType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "runs.protocol._jcs.CanonicalText",
    .tp_basicsize = sizeof(CanonicalText),
    .tp_dealloc = (destructor)CanonicalText_dealloc,
    .tp_as_buffer = &CanonicalText_as_buffer,
    .tp_as_sequence = &CanonicalText_as_sequence,
    .tp_getset = CanonicalText_getset,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Canonical JSON bytes (buffer protocol, no copy).",
};

/* ---------------------------------------------------------------- entry point */

static void parser_free(Parser *ps) {
    PyMem_RawFree(ps->places);
    PyMem_RawFree(ps->out.buf);
    PyMem_RawFree(ps->scratch.buf);
    PyMem_RawFree(ps->members);
    PyMem_RawFree(ps->sortbuf);
}

/* The selected names from a Python tuple, sorted (they are ASCII: byte order is key order). */
static int read_members(PyObject *members, Selected *selected, size_t *count) {
    *count = 0;
    if (members == Py_None) {
        return 0;
    }
    if (!PyTuple_Check(members) || PyTuple_GET_SIZE(members) > MAX_MEMBERS) {
        PyErr_SetString(PyExc_TypeError, "members must be a tuple of at most 16 names");
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(members); i++) {
        PyObject *name = PyTuple_GET_ITEM(members, i);
        Py_ssize_t length = 0;
        const char *text = PyUnicode_Check(name) ? PyUnicode_AsUTF8AndSize(name, &length) : NULL;
        int plain = text != NULL && length > 0;
        for (Py_ssize_t j = 0; plain && j < length; j++) {
            unsigned char c = (unsigned char)text[j];
            plain = c >= 0x20 && c < 0x7F && c != '"' && c != '\\';
        }
        if (!plain) {
            PyErr_Clear();
            PyErr_SetString(PyExc_TypeError, "members must be plain ASCII names");
            return -1;
        }
        Selected item = {text, (size_t)length, NULL, NULL};
        size_t j = *count;
        while (j > 0) {
            const Selected *prev = &selected[j - 1];
            size_t shorter = prev->length < item.length ? prev->length : item.length;
            int order = memcmp(prev->name, item.name, shorter);
            if (order < 0 || (order == 0 && prev->length <= item.length)) {
                break;
            }
            selected[j] = selected[j - 1];
            j--;
        }
        selected[j] = item;
        (*count)++;
    }
    return 0;
}

/* Runs the parser over `view` with the GIL released. 0 or -1 (ps->error says why). */
static int run(Parser *ps, Py_buffer *view, Selected *selected, size_t count, int has_members) {
    int status;
    ps->p = view->buf;
    ps->end = (const unsigned char *)view->buf + view->len;
    ps->member = -1;
    ps->element = -1;
    Py_BEGIN_ALLOW_THREADS
    size_t initial = ps->sha ? FLUSH_BYTES * 2 : (size_t)view->len + 64;
    status = out_reserve(ps, &ps->out, initial);
    if (status == 0 && has_members) {
        status = parse_selected(ps, selected, count);
    } else if (status == 0) {
        skip_ws(ps);
        status = parse_value(ps, 0);
        if (status == 0) {
            skip_ws(ps);
            if (ps->p != ps->end) {
                status = fail(ps, "extra data after the value");
            }
        }
    }
    if (status == 0 && ps->sha != NULL) {
        status = flush(ps);
    }
    if (status < 0) {
        ps->error_at = (size_t)(ps->p - (const unsigned char *)view->buf);
    }
    Py_END_ALLOW_THREADS
    return status;
}

/* ((member name or None, index or -1), ...) where unsafe integers were seen; None when
 * there were too many places to list (the caller then looks everywhere). */
static PyObject *places_tuple(Parser *ps, const Selected *selected) {
    if (ps->places_overflow) {
        Py_RETURN_NONE;
    }
    PyObject *result = PyTuple_New((Py_ssize_t)ps->nplaces);
    if (result == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < ps->nplaces; i++) {
        const Place *place = &ps->places[i];
        PyObject *item = place->member >= 0
                             ? Py_BuildValue("(s#l)", selected[place->member].name,
                                             (Py_ssize_t)selected[place->member].length, place->element)
                             : Py_BuildValue("(Ol)", Py_None, place->element);
        if (item == NULL) {
            Py_DECREF(result);
            return NULL;
        }
        PyTuple_SET_ITEM(result, (Py_ssize_t)i, item);
    }
    return result;
}

static PyObject *raise_parse_error(Parser *ps) {
    PyErr_Format(PyExc_ValueError, "%s at byte %zu", ps->error ? ps->error : "error", ps->error_at);
    return NULL;
}

/* (data, members=None) of both entry points: the text's buffer (the caller releases it)
 * and the selected names. -1 with an exception set. */
static int read_arguments(PyObject *args, PyObject *kwargs, const char *format, Py_buffer *view,
                          Selected *selected, size_t *count, int *has_members) {
    static char *keywords[] = {"data", "members", NULL};
    PyObject *members = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, format, keywords, view, &members)) {
        return -1;
    }
    if (read_members(members, selected, count) < 0) {
        PyBuffer_Release(view);
        return -1;
    }
    *has_members = members != Py_None;
    return 0;
}

static PyObject *jcs_canonicalize(PyObject *module, PyObject *args, PyObject *kwargs) {
    (void)module;
    Py_buffer view;
    Selected selected[MAX_MEMBERS];
    size_t count;
    int has_members;
    if (read_arguments(args, kwargs, "y*|O:canonicalize", &view, selected, &count, &has_members) < 0) {
        return NULL;
    }
    Parser ps;
    memset(&ps, 0, sizeof ps);
    int status = run(&ps, &view, selected, count, has_members);
    PyBuffer_Release(&view);
    if (status < 0) {
        raise_parse_error(&ps);
        parser_free(&ps);
        return NULL;
    }
    CanonicalText *result = PyObject_New(CanonicalText, &CanonicalTextType);
    if (result == NULL) {
        parser_free(&ps);
        return NULL;
    }
    /* hand the output over; shrink it to its length */
    char *shrunk = PyMem_RawRealloc(ps.out.buf, ps.out.len ? ps.out.len : 1);
    result->buf = shrunk ? shrunk : ps.out.buf;
    result->len = (Py_ssize_t)ps.out.len;
    result->unsafe_integers = ps.unsafe_integers;
    ps.out.buf = NULL;
    parser_free(&ps);
    return (PyObject *)result;
}

static PyObject *jcs_canonical_sha256(PyObject *module, PyObject *args, PyObject *kwargs) {
    (void)module;
    Py_buffer view;
    Selected selected[MAX_MEMBERS];
    size_t count;
    int has_members;
    if (read_arguments(args, kwargs, "y*|O:canonical_sha256", &view, selected, &count, &has_members) < 0) {
        return NULL;
    }
    Parser ps;
    memset(&ps, 0, sizeof ps);
    ps.sha = EVP_MD_CTX_new();
    if (ps.sha == NULL || EVP_DigestInit_ex(ps.sha, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(ps.sha);
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    int status = run(&ps, &view, selected, count, has_members);
    PyBuffer_Release(&view);
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int digest_length = 0;
    if (status == 0 && EVP_DigestFinal_ex(ps.sha, digest, &digest_length) != 1) {
        status = fail(&ps, "sha256 failed");
    }
    EVP_MD_CTX_free(ps.sha);
    if (status < 0) {
        raise_parse_error(&ps);
        parser_free(&ps);
        return NULL;
    }
    char hex[2 * EVP_MAX_MD_SIZE + 1];
    for (unsigned int i = 0; i < digest_length; i++) {
        snprintf(hex + 2 * i, 3, "%02x", digest[i]);
    }
    PyObject *places = places_tuple(&ps, selected);
    int unsafe = ps.unsafe_integers;
    parser_free(&ps);
    if (places == NULL) {
        return NULL;
    }
    return Py_BuildValue("(s#ON)", hex, (Py_ssize_t)(2 * digest_length), unsafe ? Py_True : Py_False, places);
}

static PyMethodDef methods[] = {
    {"canonicalize", (PyCFunction)(void (*)(void))jcs_canonicalize, METH_VARARGS | METH_KEYWORDS,
     "canonicalize(data, members=None) -> CanonicalText: RFC 8785 form of JSON text."},
    {"canonical_sha256", (PyCFunction)(void (*)(void))jcs_canonical_sha256, METH_VARARGS | METH_KEYWORDS,
     "canonical_sha256(data, members=None) -> (hex digest, unsafe_integers, places): the canonical\n"
     "form hashed as it is written, never held whole. places: ((member or None, index or -1), ...)\n"
     "where integers beyond 2**53 - 1 were seen, None when too many to list."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_jcs", "RFC 8785 canonical JSON from JSON text (GIL released).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__jcs(void) {
    if (c_locale == (locale_t)0) {
        c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
        if (c_locale == (locale_t)0) {
            PyErr_SetString(PyExc_ImportError, "cannot create the C locale");
            return NULL;
        }
    }
    skip_class['"'] = 1;
    skip_class['{'] = skip_class['['] = 2;
    skip_class['}'] = skip_class[']'] = 3;
    if (PyType_Ready(&CanonicalTextType) < 0) {
        return NULL;
    }
    return PyModule_Create(&module_def);
}
