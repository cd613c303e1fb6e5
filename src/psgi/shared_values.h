/*
 * shared_values.h - the shared memory as Perl values, for the metrics and
 * the status page (see shared_values.c).
 */
#ifndef SEROW_SHARED_VALUES_H
#define SEROW_SHARED_VALUES_H

#include "EXTERN.h"
#include "perl.h"

#include "shared/shared_state.h"

/* A new reference to a hash of the numbers behind the Prometheus metrics,
 * summed over every worker slot (lib/Serow/Metrics.pm reads it). */
SV *serow_shared_metrics_value(pTHX_ struct shared_state *shared);

/* A new reference to a snapshot for the status page: totals and one hash
 * per worker (lib/Plack/Middleware/SerowStatus.pm reads it). */
SV *serow_shared_status_value(pTHX_ struct shared_state *shared);

#endif
