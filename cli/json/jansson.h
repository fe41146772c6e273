/*
 * json/jansson.h: the jansson back end of json/json.h: each document is
 * loaded into a tree, then walked.
 */
#ifndef NCCLGUARD_CLI_JSON_JANSSON_H
#define NCCLGUARD_CLI_JSON_JANSSON_H

#include "json/json.h"

ng_jparser *ng_jparser_new_jansson(void);

#endif
