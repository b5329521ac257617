//! Spans whose start and end are given, not taken from the moment a `tracing` span is opened
//! and closed.
//!
//! A control plane learns what happened to a subscriber from the outputs of a pure engine
//! call, after the call: the DHCPDISCOVER arrived at `t0`, the AAA decided inside the call, the
//! OFFER was built at `t1`. A `tracing` span opened after the fact would start at `t1`; a
//! [`TimedSpan`] is built with `t0` and ended with `t1`, so the trace shows the real intervals.
//! It goes through the same global tracer provider as every `tracing` span (set by
//! [`crate::init`]), so both kinds land in one trace: [`TimedSpan::adopt`] makes a `tracing`
//! span (a gRPC call, for instance) its child, and that child's context is what
//! [`crate::grpc`] propagates.
//!
//! Without [`crate::init`] the global provider is a no-op: every method still works and
//! nothing is recorded.

use std::time::SystemTime;

pub use opentelemetry::KeyValue;
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer as _};
use opentelemetry::{Context, global};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use crate::SCOPE;

/// One span with explicit timestamps. Ending it consumes it; dropping it without
/// [`TimedSpan::end_at`] ends it at the moment of the drop.
#[derive(Debug, Clone)]
pub struct TimedSpan {
    cx: Context,
}

impl TimedSpan {
    /// A new trace: a root span named `name` that started at `start`.
    pub fn root(name: &'static str, start: SystemTime, attributes: Vec<KeyValue>) -> Self {
        Self::start(name, start, attributes, &Context::new())
    }

    /// A child of `self` that started at `start`.
    pub fn child(&self, name: &'static str, start: SystemTime, attributes: Vec<KeyValue>) -> Self {
        Self::start(name, start, attributes, &self.cx)
    }

    fn start(
        name: &'static str,
        start: SystemTime,
        attributes: Vec<KeyValue>,
        parent: &Context,
    ) -> Self {
        let tracer = global::tracer(SCOPE);
        let span = tracer
            .span_builder(name)
            .with_kind(SpanKind::Internal)
            .with_start_time(start)
            .with_attributes(attributes)
            .start_with_context(&tracer, parent);
        Self {
            cx: parent.with_span(span),
        }
    }

    /// Adds an attribute.
    pub fn set_attribute(&self, attribute: KeyValue) {
        self.cx.span().set_attribute(attribute);
    }

    /// Ends the span at `end`; `error` marks it failed with that description.
    pub fn end_at(self, end: SystemTime, error: Option<String>) {
        let span = self.cx.span();
        if let Some(e) = error {
            span.set_status(Status::error(e));
        }
        span.end_with_timestamp(end);
    }

    /// Makes the not yet entered `tracing` span `span` a child of `self`. Fails (leaving
    /// `span` as it was) only when `span` is disabled or already entered.
    pub fn adopt(&self, span: &tracing::Span) {
        let _ = span.set_parent(self.cx.clone());
    }

    /// Links `span` to `self` (a batch serving several traces is a child of one of them and
    /// linked to the others).
    pub fn link_from(&self, span: &tracing::Span) {
        span.add_link(self.cx.span().span_context().clone());
    }

    /// The trace id, as 32 lowercase hex digits (for logs).
    pub fn trace_id(&self) -> String {
        self.cx.span().span_context().trace_id().to_string()
    }
}

/// A `SystemTime` for an `Instant` observed earlier, on the wall clock of now.
pub fn wall_time(at: std::time::Instant) -> SystemTime {
    let ago = at.elapsed();
    SystemTime::now()
        .checked_sub(ago)
        .unwrap_or(SystemTime::UNIX_EPOCH)
}
