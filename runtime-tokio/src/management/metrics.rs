//! `/metrics`: the process's metrics, recorded through the `metrics` facade, in Prometheus'
//! text format.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};

use super::{Shared, error};

/// Latency buckets, in seconds: 100 µs to 10 s.
const SECONDS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// Group sizes: 1 to 256.
const SIZES: [f64; 9] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0];

/// Installs a Prometheus recorder as the process's `metrics` recorder and returns its handle,
/// for [`super::ManagementSettings::metrics`]. Latency histograms (`*_seconds`) get buckets
/// from 100 µs to 10 s, group sizes from 1 to 256. Metrics recorded before it are not seen.
///
/// # Errors
/// Another recorder is installed already (a process has one).
pub fn install_prometheus() -> Result<PrometheusHandle, BuildError> {
    PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &SECONDS)?
        .set_buckets_for_metric(Matcher::Suffix("_size".into()), &SIZES)?
        .install_recorder()
}

pub(super) async fn render(State(served): Shared) -> Response {
    match &served.metrics {
        Some(handle) => {
            let text = handle.render();
            let kind = "text/plain; version=0.0.4; charset=utf-8";
            (StatusCode::OK, [(header::CONTENT_TYPE, kind)], text).into_response()
        }
        None => error(
            StatusCode::NOT_FOUND,
            "metrics are off: no Prometheus recorder given",
        ),
    }
}
