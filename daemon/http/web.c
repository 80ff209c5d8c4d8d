/* SPDX-License-Identifier: MIT */
/* The web page: its own files, embedded in the binary (web-assets.h), and
 * the charting library read from Debian's installed package. The page reads
 * everything else through the public JSON API, like any other client. */
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

#include "http/handlers.h"
#include "http/web-assets.h"

/* The library's files are a few hundred KiB; a larger file is not it. */
#define LIBRARY_MAX_BYTES (4 * 1024 * 1024)

/* The only files served from javascript_dir: a fixed list, so no request
 * path ever reaches the file system. */
static const struct {
        const char *name, *path, *content_type;
} library_files[] = {
        { "dygraph.min.js", "dygraphs/dygraph.min.js", "text/javascript; charset=utf-8" },
        { "dygraph.min.css", "dygraphs/dygraph.min.css", "text/css; charset=utf-8" },
};

static const struct web_asset *asset_find(const char *name) {
        for (size_t i = 0; i < web_n_assets; i++)
                if (streq(web_assets[i].name, name))
                        return &web_assets[i];
        return NULL;
}

static void respond_asset(struct request *rq, const char *name) {
        const struct web_asset *a = asset_find(name);
        if (!a) {
                respond_error(rq, 404, "not_found", "no such file");
                return;
        }
        rq->text = malloc(a->len + 1);
        if (!rq->text) {
                respond_error(rq, 503, "unavailable", "out of memory");
                return;
        }
        memcpy(rq->text, a->data, a->len);
        rq->text_len = a->len;
        rq->content_type = a->content_type;
        snprintf(rq->etag, sizeof rq->etag, "%s", a->etag);
        rq->status = 200;
}

void h_web_overview(struct request *rq, const char *const *parts, size_t nparts) {
        if (check_args(rq, NULL))
                respond_asset(rq, "overview.html");
}

void h_web_run(struct request *rq, const char *const *parts, size_t nparts) {
        int64_t id;
        /* the page itself asks the API for the run (and says when there is none) */
        if (check_args(rq, NULL) && parse_id(rq, parts[1], &id))
                respond_asset(rq, "page.html");
}

void h_web_job(struct request *rq, const char *const *parts, size_t nparts) {
        /* the path segment, percent-decoded, is the job id: the page asks
         * the API for the job (and says when there is none) */
        if (!check_args(rq, NULL))
                return;
        if (!valid_label(parts[1], TAG_VALUE_MAX)) {
                respond_error(rq, 400, "bad_request", "not a job id (1 to %d bytes of UTF-8 text)", TAG_VALUE_MAX);
                return;
        }
        respond_asset(rq, "page.html");
}

void h_web_asset(struct request *rq, const char *const *parts, size_t nparts) {
        if (check_args(rq, NULL))
                respond_asset(rq, parts[1]);
}

void h_web_library(struct request *rq, const char *const *parts, size_t nparts) {
        const char *dir = api_of(rq)->config->http_javascript_dir;
        if (!check_args(rq, NULL))
                return;
        for (size_t i = 0; i < ELEMENTSOF(library_files); i++) {
                if (!streq(parts[2], library_files[i].name))
                        continue;
                _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                struct stat st;
                char *text = NULL;
                size_t len = 0;
                if (dfd < 0 || fstatat(dfd, library_files[i].path, &st, 0) < 0 ||
                    read_file_at(dfd, library_files[i].path, LIBRARY_MAX_BYTES, &text, &len) < 0)
                        break;
                rq->text = text;
                rq->text_len = len;
                rq->content_type = library_files[i].content_type;
                /* the package's file changes only with the package: its size
                 * and modification time name its version */
                snprintf(rq->etag, sizeof rq->etag, "\"%llx-%llx\"", (unsigned long long)st.st_size,
                         (unsigned long long)st.st_mtim.tv_sec);
                rq->status = 200;
                return;
        }
        respond_error(rq, 404, "not_found", "no such file (the charts need Debian's libjs-dygraphs)");
}
