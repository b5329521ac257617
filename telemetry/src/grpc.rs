//! W3C trace context (`traceparent`, `tracestate`) across the control <-> dataplane gRPC hop.
//!
//! Client side: wrap a generated client with [`TraceContextInterceptor`] (or call
//! [`inject_context`] on a request) and the caller's current `tracing` span travels in the
//! request metadata. Server side: pass [`server_span`] to `tonic`'s `Server::trace_fn`, so every
//! request is handled inside a span whose parent is the caller's span; spans the handler opens
//! (`#[tracing::instrument]`) become its children. [`set_parent_from_metadata`] does the same for
//! one handler span when a server cannot use `trace_fn`.
//!
//! The propagator is always W3C Trace Context, whatever the global propagator is, so that the
//! two sides agree even in a test that never called [`crate::init`].

use opentelemetry::Context;
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tonic::metadata::{MetadataKey, MetadataMap, MetadataValue};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Writes propagation fields into gRPC metadata (lower-case ASCII keys and values).
struct MetadataInjector<'a>(&'a mut MetadataMap);

impl Injector for MetadataInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        // Trace Context fields are ASCII by construction; a field that is not is dropped
        // rather than failing the RPC.
        if let (Ok(key), Ok(value)) = (
            MetadataKey::from_bytes(key.as_bytes()),
            MetadataValue::try_from(value.as_str()),
        ) {
            self.0.insert(key, value);
        }
    }
}

/// Reads propagation fields from gRPC metadata.
struct MetadataExtractor<'a>(&'a MetadataMap);

impl Extractor for MetadataExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.0
            .keys()
            .filter_map(|k| match k {
                tonic::metadata::KeyRef::Ascii(k) => Some(k.as_str()),
                tonic::metadata::KeyRef::Binary(_) => None,
            })
            .collect()
    }
}

/// Reads propagation fields from HTTP/2 headers (what `Server::trace_fn` sees).
struct HeaderExtractor<'a>(&'a http::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

/// Injects the context of `span` into `metadata`.
pub fn inject_span_context(span: &tracing::Span, metadata: &mut MetadataMap) {
    TraceContextPropagator::new().inject_context(&span.context(), &mut MetadataInjector(metadata));
}

/// Injects the current `tracing` span's context into an outgoing request.
pub fn inject_context<T>(request: &mut tonic::Request<T>) {
    inject_span_context(&tracing::Span::current(), request.metadata_mut());
}

/// The remote parent carried by incoming metadata (an empty context when there is none).
pub fn extract_context(metadata: &MetadataMap) -> Context {
    TraceContextPropagator::new().extract(&MetadataExtractor(metadata))
}

/// Makes the caller's span (from `metadata`) the parent of `span`. Call it before `span` is
/// entered for the first time; a request without trace context leaves `span` a root.
pub fn set_parent_from_metadata(span: &tracing::Span, metadata: &MetadataMap) {
    let parent = extract_context(metadata);
    // Fails only when `span` is disabled or was already started, which leaves it as it was:
    // a missing link, never a failed RPC.
    let _ = span.set_parent(parent);
}

/// A `tonic` client interceptor that adds `traceparent` to every request from the span that is
/// current when the call is made:
/// `DataplaneClient::with_interceptor(channel, TraceContextInterceptor)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct TraceContextInterceptor;

impl tonic::service::Interceptor for TraceContextInterceptor {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        inject_context(&mut request);
        Ok(request)
    }
}

/// A server span per gRPC request, child of the caller's span:
/// `Server::builder().trace_fn(kbng_telemetry::grpc::server_span)`.
/// Named `grpc.server` with `rpc.method` = the request path (`/pkg.Service/Method`).
pub fn server_span(request: &http::Request<()>) -> tracing::Span {
    let span = tracing::info_span!(
        "grpc.server",
        otel.kind = "server",
        rpc.system = "grpc",
        rpc.method = %request.uri().path(),
    );
    let parent = TraceContextPropagator::new().extract(&HeaderExtractor(request.headers()));
    let _ = span.set_parent(parent);
    span
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState,
    };

    #[test]
    fn traceparent_round_trips_through_metadata() {
        let sc = SpanContext::new(
            TraceId::from(0x0af7651916cd43dd8448eb211c80319c_u128),
            SpanId::from(0xb7ad6b7169203331_u64),
            TraceFlags::SAMPLED,
            true,
            TraceState::default(),
        );
        let cx = Context::new().with_remote_span_context(sc.clone());
        let mut md = MetadataMap::new();
        TraceContextPropagator::new().inject_context(&cx, &mut MetadataInjector(&mut md));
        assert_eq!(
            md.get("traceparent").and_then(|v| v.to_str().ok()),
            Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
        );
        let back = extract_context(&md);
        assert_eq!(back.span().span_context().trace_id(), sc.trace_id());
        assert_eq!(back.span().span_context().span_id(), sc.span_id());
        assert!(back.span().span_context().is_remote());
    }

    #[test]
    fn missing_or_garbage_traceparent_gives_no_parent() {
        let mut md = MetadataMap::new();
        assert!(!extract_context(&md).span().span_context().is_valid());
        md.insert("traceparent", MetadataValue::from_static("00-zz-yy-01"));
        assert!(!extract_context(&md).span().span_context().is_valid());
    }
}
