/*
 * harness/dsv4q_backend.h - the path of the backend ABI header before it
 * moved to abi/dsv4q_backend.h (issue 22). Plugins written against the old
 * path keep building unchanged; new code includes abi/dsv4q_backend.h.
 * The relative path works in the source tree and in an installed tree
 * (include/dsv4q/harness/ beside include/dsv4q/abi/).
 */
#include "../abi/dsv4q_backend.h"
