/*
 * json/parser.c: see json/parser.h.
 */
#include "json/parser.h"

#include "json/jansson.h"
#include "json/simdjson.h"

ng_jparser *ng_jparser_new(enum ng_json_backend b)
{
    return b == NG_JSON_JANSSON ? ng_jparser_new_jansson() : ng_jparser_new_simdjson();
}
