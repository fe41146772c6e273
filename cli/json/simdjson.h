/*
 * json/simdjson.h: the simdjson back end of json/json.h (simdjson.cc, its
 * On-Demand API), callable from C.
 */
#ifndef NCCLGUARD_CLI_JSON_SIMDJSON_H
#define NCCLGUARD_CLI_JSON_SIMDJSON_H

#include "json/json.h"

#ifdef __cplusplus
extern "C" {
#endif

ng_jparser *ng_jparser_new_simdjson(void);

#ifdef __cplusplus
}
#endif

#endif
