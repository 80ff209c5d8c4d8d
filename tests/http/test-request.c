/* SPDX-License-Identifier: MIT */
/* The TCP API's bearer token check: the exact token passes, with or
 * without the blanks HTTP allows around a header value, and nothing else
 * does -- not a token with a suffix, a prefix of it, an empty one, another
 * case or another scheme. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/request.h"
#include "tap.h"

static const char *auth_name(enum auth_result a) {
        return a == AUTH_OK ? "ok" : a == AUTH_WRONG ? "wrong" : "missing";
}

static void test_bearer(void) {
        static const char token[] = "s3cret-token-5c1e";
        static const struct {
                const char *header;
                enum auth_result want;
        } rows[] = {
                { NULL, AUTH_MISSING },
                { "Bearer s3cret-token-5c1e", AUTH_OK },
                { "bearer s3cret-token-5c1e", AUTH_OK },     /* the scheme's case does not matter */
                { "Bearer    s3cret-token-5c1e", AUTH_OK },  /* nor the spaces after it */
                { "Bearer s3cret-token-5c1ex", AUTH_WRONG }, /* a suffix */
                { "Bearer s3cret-token-5c1e-and-more", AUTH_WRONG },
                { "Bearer s3cret-token-5c1", AUTH_WRONG }, /* a prefix */
                { "Bearer s", AUTH_WRONG },
                { "Bearer ", AUTH_WRONG }, /* empty */
                { "Bearer", AUTH_WRONG },
                { "", AUTH_WRONG },
                { "Bearer s3cret-token-5c1e ", AUTH_OK }, /* blanks after the value are no part of it */
                { "Bearer s3cret-token-5c1e\t", AUTH_OK },
                { "Bearer s3cret-token-5c1e \t ", AUTH_OK },
                { "Bearer s3cret-token-5c1e x", AUTH_WRONG }, /* but anything after them is */
                { "Bearer s3cret-token-5c1e\v", AUTH_WRONG }, /* and no other blank is OWS */
                { "Bearer  ", AUTH_WRONG },
                { "Bearer S3CRET-TOKEN-5C1E", AUTH_WRONG }, /* the token's case does */
                { "Bearer t3cret-token-5c1e", AUTH_WRONG }, /* one byte off, first or last */
                { "Bearer s3cret-token-5c1f", AUTH_WRONG },
                { "Basic s3cret-token-5c1e", AUTH_WRONG },
                { "Bearers3cret-token-5c1e", AUTH_WRONG },
                { "s3cret-token-5c1e", AUTH_WRONG },
        };
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
                enum auth_result got = request_check_bearer(rows[i].header, token, strlen(token));
                if (got != rows[i].want)
                        TAP_FAIL("Authorization: \"%s\": %s, want %s", rows[i].header ? rows[i].header : "(none)",
                                 auth_name(got), auth_name(rows[i].want));
        }
        /* the token is its token_len bytes: the same header is right for
         * one length and too long for a shorter one */
        CHECK(request_check_bearer("Bearer s3cret", token, 6) == AUTH_OK);
        CHECK(request_check_bearer("Bearer s3cret", token, 5) == AUTH_WRONG);
}

/* The next page's URL of a list: each value percent-encoded so that the
 * request's own decoding gives it back, byte for byte. */
static void test_query_append(void) {
        static const char *const values[] = { "all", "a b&c=d", "100%", "r\xc3\xa9sum\xc3\xa9+/?#", "~-._" };
        _cleanup_free_ char *q = NULL;
        for (size_t i = 0; i < ELEMENTSOF(values); i++) {
                char key[8];
                snprintf(key, sizeof key, "k%zu", i);
                CHECK(request_query_append(&q, key, values[i]) == 0);
        }
        CHECK(q && strcmp(q, "k0=all&k1=a%20b%26c%3Dd&k2=100%25&k3=r%C3%A9sum%C3%A9%2B%2F%3F%23&k4=~-._") == 0);
        _cleanup_free_ char *target = NULL;
        CHECK(asprintf(&target, "/v1/runs?%s", q) > 0);
        struct request rq = {};
        CHECK(request_parse_target(&rq, target) == 0);
        CHECK(rq.n_args == ELEMENTSOF(values));
        for (size_t i = 0; i < rq.n_args && i < ELEMENTSOF(values); i++)
                if (strcmp(rq.args[i].value, values[i]) != 0)
                        TAP_FAIL("value %zu came back as \"%s\"", i, rq.args[i].value);
        request_done(&rq);
}

int main(void) {
        test_bearer();
        test_query_append();
        TEST_DONE();
}
