/*
 * json/parser.h: a parser of one of the two back ends.
 */
#ifndef NCCLGUARD_CLI_JSON_PARSER_H
#define NCCLGUARD_CLI_JSON_PARSER_H

#include "json/json.h"

/* NULL when out of memory; freed with ng_jparser_free. */
ng_jparser *ng_jparser_new(enum ng_json_backend b);

#endif
