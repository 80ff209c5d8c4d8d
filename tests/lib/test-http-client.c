/* SPDX-License-Identifier: MIT */
/* lib/http-client.c's pure parts beside the response parser (which has its
 * fuzz target): URLs, tokens, loopback hosts. */
#include <stdlib.h>
#include <string.h>

#include "http-client.h"
#include "tap.h"

static void check_url(const char *in, int want_r, bool tls, const char *host, const char *port) {
        struct http_url u = {};
        int r = http_url_parse(in, &u);
        CHECK_CASE(in, r == want_r);
        if (r == 0 && want_r == 0) {
                CHECK_CASE(in, u.tls == tls);
                CHECK_STR(u.host, host);
                CHECK_STR(u.port, port);
        }
        http_url_done(&u);
}

static void test_urls(void) {
        check_url("http://127.0.0.1:9477", 0, false, "127.0.0.1", "9477");
        check_url("https://mon.example.org:443/", 0, true, "mon.example.org", "443");
        check_url("HTTPS://host", 0, true, "host", "9477");
        check_url("http://[::1]:8080", 0, false, "::1", "8080");
        check_url("https://[fe80::1]", 0, true, "fe80::1", "9477");
        check_url("http://h:00080", 0, false, "h", "80");

        const char *bad[] = {
                "",
                "127.0.0.1:9477",
                "ftp://host",
                "http://",
                "https://:9477",
                "http://h:",
                "http://h:0",
                "http://h:65536",
                "http://h:123456",
                "http://h:-1",
                "http://h:80x",
                "http://user@h",
                "http://h/v1/runs",
                "http://h?x=1",
                "http://h#f",
                "http://[::1",
                "http://[nope]:1",
                "http://::1",
                "http://h h",
                "http://h%20",
                "http://[::1]x",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                check_url(bad[i], -EINVAL, false, NULL, NULL);
}

static void test_tokens(void) {
        CHECK(http_token_valid("s3cr3t-token_with.chars~+/="));
        CHECK(!http_token_valid(""));
        CHECK(!http_token_valid(NULL));
        CHECK(!http_token_valid("two words"));
        CHECK(!http_token_valid("line\r\nX-Injected: 1"));
        CHECK(!http_token_valid("tab\t"));
        CHECK(!http_token_valid("caf\xc3\xa9"));

        char *big = malloc(HTTP_TOKEN_MAX + 2);
        CHECK(big);
        if (big) {
                memset(big, 'a', HTTP_TOKEN_MAX);
                big[HTTP_TOKEN_MAX] = 0;
                CHECK(http_token_valid(big));
                big[HTTP_TOKEN_MAX] = 'a';
                big[HTTP_TOKEN_MAX + 1] = 0;
                CHECK(!http_token_valid(big));
                free(big);
        }
}

static void test_loopback(void) {
        CHECK(http_host_is_loopback("localhost"));
        CHECK(http_host_is_loopback("LocalHost"));
        CHECK(http_host_is_loopback("127.0.0.1"));
        CHECK(http_host_is_loopback("127.1.2.3"));
        CHECK(http_host_is_loopback("::1"));
        CHECK(!http_host_is_loopback("128.0.0.1"));
        CHECK(!http_host_is_loopback("10.0.0.1"));
        CHECK(!http_host_is_loopback("::2"));
        CHECK(!http_host_is_loopback("localhost.example.org"));
        CHECK(!http_host_is_loopback("mon.example.org"));

        CHECK(http_host_is_address("10.0.0.1"));
        CHECK(http_host_is_address("fe80::1"));
        CHECK(!http_host_is_address("localhost"));
}

int main(void) {
        test_urls();
        test_tokens();
        test_loopback();
        TEST_DONE();
}
