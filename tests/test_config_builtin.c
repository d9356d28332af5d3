/*
 * test_config_builtin.c - the built-in configs are config.json texts
 * (io/config_builtin.c), parsed by the one loader.
 *
 * Pins what that file claims: every text is a JSON object that names itself
 * and states every field the serialiser emits (so no built-in leans on a
 * default of C3), parsing it is what dsv4q_config_builtin returns, and the
 * canonical serialisation of the result parses back to the same struct (C1).
 */
#include "tests/testutil.h"
#include <jansson.h>
#include "io/config.h"

static const char *const names[] = {"tiny",          "tiny-bf16", "flash-slice",     "flash",        "pro",
                                    "pub-tiny-like", "tiny-v41",  "tiny-v41-dspark", "flash41-slice"};

static void texts_state_every_field(void **state)
{
    (void)state;
    char err[512];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *text = dsv4q_config_builtin_json(names[i]);
        assert_non_null(text);
        json_error_t je;
        json_t *t = json_loads(text, JSON_REJECT_DUPLICATES, &je);
        if (!t) fail_msg("%s: %s", names[i], je.text);
        assert_string_equal(json_string_value(json_object_get(t, "name")), names[i]);
        dsv4q_config c, p;
        assert_int_equal(dsv4q_config_builtin(&c, names[i], err, sizeof err), 0);
        assert_int_equal(dsv4q_config_parse(&p, text, names[i], err, sizeof err), 0);
        assert_memory_equal(&c, &p, sizeof c);
        char *js = dsv4q_config_to_json(&c);
        json_t *e = json_loads(js, 0, &je);
        assert_non_null(e);
        const char *k;
        json_t *v;
        json_object_foreach(e, k, v) {
            if (!json_object_get(t, k)) fail_msg("built-in %s does not state '%s'", names[i], k);
        }
        dsv4q_config r;
        memset(&r, 0, sizeof r);
        assert_int_equal(dsv4q_config_parse(&r, js, "round trip", err, sizeof err), 0);
        assert_memory_equal(&c, &r, sizeof c);
        free(js);
        json_decref(e);
        json_decref(t);
    }
    assert_null(dsv4q_config_builtin_json("huge"));
    assert_null(dsv4q_config_builtin_json(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(texts_state_every_field),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
