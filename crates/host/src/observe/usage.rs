//! What each tenant used: the counters billing reads, on `/metrics`
//! (`edgegate_tenant_*_total{tenant}`) and at `GET /tenants/NAME/usage`. They are fed, when
//! each request to a tenant's route has ended (its streamed body too, whole or cut), by the
//! same meter that holds the request to its limits: the CPU its budget counted (the streaming
//! phase and the host's work for the guest included), the KV operations its `kv_ops` counted,
//! the outbound requests its `subrequests` counted, and the bytes that crossed the gateway.
//! A tenant's counters carry on across reloads that keep it, and appear with its first
//! request: a node of ten thousand idle tenants exports none of theirs.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use edgegate_runtime::Usage;
use serde::Serialize;

use crate::observe::metrics::{Count, counter, seconds_counter};

/// One tenant's counters: made with its first request (or the first look at them), so that
/// ten thousand idle tenants add no series to `/metrics`.
#[derive(Debug)]
pub(crate) struct TenantUsage {
    tenant: String,
    counters: OnceLock<Counters>,
}

#[derive(Debug)]
struct Counters {
    requests: Arc<Count>,
    cpu_ns: Arc<Count>,
    request_bytes: Arc<Count>,
    response_bytes: Arc<Count>,
    kv_ops: Arc<Count>,
    fetches: Arc<Count>,
}

/// What one request used, as it is counted.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Used {
    /// Its guest's (and the streaming phase's, and the host's work for it).
    pub(crate) usage: Usage,
    /// Request body bytes read.
    pub(crate) request_bytes: u64,
    /// Response body bytes sent.
    pub(crate) response_bytes: u64,
}

/// A tenant's counters as `GET /tenants/NAME/usage` answers them.
#[derive(Debug, Serialize, PartialEq)]
pub(crate) struct Report {
    pub(crate) requests: u64,
    pub(crate) cpu_seconds: f64,
    pub(crate) request_bytes: u64,
    pub(crate) response_bytes: u64,
    pub(crate) kv_operations: u64,
    pub(crate) fetches: u64,
}

impl TenantUsage {
    /// Tenant `tenant`'s counters; a reload carries the same value over, so they go on.
    pub(crate) fn of(tenant: &str) -> Self {
        Self { tenant: tenant.to_owned(), counters: OnceLock::new() }
    }

    /// The counters: the series the tenant already has, if anything holds them.
    fn counters(&self) -> &Counters {
        self.counters.get_or_init(|| {
            let labels = || vec![("tenant", self.tenant.clone())];
            Counters {
                requests: counter("edgegate_tenant_requests_total", labels()),
                cpu_ns: seconds_counter("edgegate_tenant_cpu_seconds_total", labels()),
                request_bytes: counter("edgegate_tenant_request_bytes_total", labels()),
                response_bytes: counter("edgegate_tenant_response_bytes_total", labels()),
                kv_ops: counter("edgegate_tenant_kv_operations_total", labels()),
                fetches: counter("edgegate_tenant_fetches_total", labels()),
            }
        })
    }

    /// Counts one request that has ended.
    pub(crate) fn record(&self, used: &Used) {
        let c = self.counters();
        c.requests.increment(1);
        c.cpu_ns.increment(u64::try_from(used.usage.cpu.as_nanos()).unwrap_or(u64::MAX));
        c.request_bytes.increment(used.request_bytes);
        c.response_bytes.increment(used.response_bytes);
        c.kv_ops.increment(u64::from(used.usage.kv_ops));
        c.fetches.increment(u64::from(used.usage.fetches));
    }

    /// The counters now.
    pub(crate) fn report(&self) -> Report {
        let c = self.counters();
        Report {
            requests: c.requests.get(),
            cpu_seconds: Duration::from_nanos(c.cpu_ns.get()).as_secs_f64(),
            request_bytes: c.request_bytes.get(),
            response_bytes: c.response_bytes.get(),
            kv_operations: c.kv_ops.get(),
            fetches: c.fetches.get(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_counted_in_each_of_its_tenant_s_counters() {
        let usage = TenantUsage::of("usage-test");
        let guest =
            Usage { cpu: Duration::from_micros(1500), kv_ops: 3, fetches: 2, ..Usage::default() };
        for _ in 0..2 {
            usage.record(&Used { usage: guest, request_bytes: 10, response_bytes: 100 });
        }
        let expected = Report {
            requests: 2,
            cpu_seconds: 0.003,
            request_bytes: 20,
            response_bytes: 200,
            kv_operations: 6,
            fetches: 4,
        };
        assert_eq!(usage.report(), expected);
        // Another handle on the same tenant is the same series: a reload's counts carry on.
        assert_eq!(TenantUsage::of("usage-test").report(), expected);
    }
}
