/*
 * analyze/p2p.h: the detector of point-to-point ops that wait on a peer.
 */
#ifndef NCCLGUARD_CLI_ANALYZE_P2P_H
#define NCCLGUARD_CLI_ANALYZE_P2P_H

#include "analyze/model.h"

void an_detect_p2p(struct an *a);

#endif
