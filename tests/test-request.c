/* SPDX-License-Identifier: MIT */
/* The TCP API's bearer token check: the exact token passes, with or
 * without the blanks HTTP allows around a header value, and nothing else
 * does -- not a token with a suffix, a prefix of it, an empty one, another
 * case or another scheme. */
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

int main(void) {
        test_bearer();
        TEST_DONE();
}
