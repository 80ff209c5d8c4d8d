/* SPDX-License-Identifier: MIT */
/* The one place that names JSON fields. */
#pragma once

#include <json-c/json.h>

#include "manager.h"
#include "query.h"
#include "sample.h"

json_object *render_sample(const struct sample *s);
/* latest may be NULL (JSON null). */
json_object *render_run(const struct run_info *ri, const struct sample *latest);
json_object *render_summary(const struct run_info *ri, int64_t now_ms);
json_object *render_window(const struct window_rates *w, double window_s);
json_object *render_health(const struct manager *m);
json_object *render_system(const struct manager *m);
