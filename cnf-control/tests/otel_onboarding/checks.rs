//! What the receiver got: the onboarding trace and the metric points of both binaries.

use std::collections::HashMap;

use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{Metric, metric, number_data_point};
use opentelemetry_proto::tonic::trace::v1::Span;

use crate::CLIENT_MAC;
use crate::receiver::Received;

fn attr(attrs: &[KeyValue], key: &str) -> Option<String> {
    attrs.iter().find(|kv| kv.key == key).and_then(|kv| {
        match kv.value.as_ref()?.value.as_ref()? {
            any_value::Value::StringValue(s) => Some(s.clone()),
            any_value::Value::IntValue(i) => Some(i.to_string()),
            other => Some(format!("{other:?}")),
        }
    })
}

/// Every span received, with the `service.name` of its resource.
fn spans(r: &Received) -> Vec<(String, &Span)> {
    let mut v = Vec::new();
    for req in &r.traces {
        for rs in &req.resource_spans {
            let service = rs
                .resource
                .as_ref()
                .and_then(|res| attr(&res.attributes, "service.name"))
                .unwrap_or_default();
            for ss in &rs.scope_spans {
                for s in &ss.spans {
                    v.push((service.clone(), s));
                }
            }
        }
    }
    v
}

pub fn trace(r: &Received, session_id: u64) {
    let all = spans(r);
    let names: Vec<(&str, &str)> = all
        .iter()
        .map(|(svc, s)| (svc.as_str(), s.name.as_str()))
        .collect();
    let onboarding = all
        .iter()
        .find(|(svc, s)| {
            svc == "kbng-control"
                && s.name == "onboarding"
                && attr(&s.attributes, "session.id") == Some(session_id.to_string())
        })
        .map(|(_, s)| *s)
        .unwrap_or_else(|| panic!("no onboarding span for session {session_id}: {names:?}"));
    assert!(onboarding.parent_span_id.is_empty(), "onboarding is a root");
    assert_eq!(
        attr(&onboarding.attributes, "subscriber.mac").as_deref(),
        Some(CLIENT_MAC)
    );
    assert_eq!(
        attr(&onboarding.attributes, "session.state").as_deref(),
        Some("active")
    );
    assert!(onboarding.end_time_unix_nano > onboarding.start_time_unix_nano);
    let in_trace: Vec<&Span> = all
        .iter()
        .filter(|(_, s)| s.trace_id == onboarding.trace_id)
        .map(|(_, s)| *s)
        .collect();
    let child = |name: &str, parent: &Span| -> &Span {
        in_trace
            .iter()
            .copied()
            .find(|s| s.name == name && s.parent_span_id == parent.span_id)
            .unwrap_or_else(|| panic!("no {name} under {}: {names:?}", parent.name))
    };
    let discover = child("dhcp.discover", onboarding);
    let aaa = child("aaa", discover);
    assert_eq!(
        attr(&aaa.attributes, "aaa.result").as_deref(),
        Some("accept")
    );
    let request = child("dhcp.request", onboarding);
    assert!(request.start_time_unix_nano >= discover.end_time_unix_nano);
    let program = child("dataplane.program", onboarding);
    assert_eq!(
        attr(&program.attributes, "session.id"),
        Some(session_id.to_string())
    );
    // The dataplane's server span: same trace, the control's programming span as parent.
    let server = all
        .iter()
        .find(|(svc, s)| {
            svc == "kbng-dataplane"
                && s.name == "grpc.server"
                && s.parent_span_id == program.span_id
        })
        .map(|(_, s)| *s)
        .unwrap_or_else(|| panic!("no dataplane span under the programming span: {names:?}"));
    assert_eq!(server.trace_id, onboarding.trace_id);
    assert_eq!(
        attr(&server.attributes, "rpc.method").as_deref(),
        Some("/kbng.dataplane.v1.Dataplane/InstallSessions")
    );
    // Everything of the onboarding lies within it.
    for s in &in_trace {
        assert!(
            s.start_time_unix_nano >= onboarding.start_time_unix_nano
                && s.end_time_unix_nano <= onboarding.end_time_unix_nano,
            "{} outside the onboarding",
            s.name
        );
    }
}

/// The last point of every metric of `service`, by name.
fn metrics<'a>(r: &'a Received, service: &str) -> HashMap<&'a str, &'a Metric> {
    let mut m = HashMap::new();
    for req in &r.metrics {
        for rm in &req.resource_metrics {
            let svc = rm
                .resource
                .as_ref()
                .and_then(|res| attr(&res.attributes, "service.name"));
            if svc.as_deref() != Some(service) {
                continue;
            }
            for sm in &rm.scope_metrics {
                for metric in &sm.metrics {
                    m.insert(metric.name.as_str(), metric); // later exports win
                }
            }
        }
    }
    m
}

fn int(p: &opentelemetry_proto::tonic::metrics::v1::NumberDataPoint) -> i64 {
    match p.value {
        Some(number_data_point::Value::AsInt(v)) => v,
        Some(number_data_point::Value::AsDouble(v)) => v as i64,
        None => 0,
    }
}

fn histogram_count(m: &HashMap<&str, &Metric>, name: &str) -> u64 {
    match m.get(name).and_then(|m| m.data.as_ref()) {
        Some(metric::Data::Histogram(h)) => h.data_points.iter().map(|p| p.count).sum(),
        other => panic!("{name}: not a histogram: {other:?} (have {:?})", m.keys()),
    }
}

pub fn control_metrics(r: &Received) {
    let m = metrics(r, "kbng-control");
    let Some(metric::Data::Gauge(g)) = m.get("kbng.sessions").and_then(|m| m.data.as_ref()) else {
        panic!("no sessions gauge: {:?}", m.keys());
    };
    let active = g
        .data_points
        .iter()
        .find(|p| {
            attr(&p.attributes, "state").as_deref() == Some("active")
                && attr(&p.attributes, "plan").as_deref() == Some("gold")
        })
        .expect("a sessions point for (active, gold)");
    assert_eq!(int(active), 1);
    assert!(histogram_count(&m, "kbng.dhcp.dora.duration") >= 1);
    assert!(histogram_count(&m, "kbng.aaa.duration") >= 1);
    assert!(histogram_count(&m, "kbng.programming.duration") >= 1);
    assert!(histogram_count(&m, "kbng.programming.batch.size") >= 1);
    let Some(metric::Data::Gauge(limit)) = m
        .get("kbng.licence.sessions.limit")
        .and_then(|m| m.data.as_ref())
    else {
        panic!("no licence limit gauge");
    };
    assert_eq!(int(&limit.data_points[0]), 1000);
}

fn sum_points<'a>(
    m: &HashMap<&str, &'a Metric>,
    name: &str,
) -> &'a [opentelemetry_proto::tonic::metrics::v1::NumberDataPoint] {
    match m.get(name).and_then(|m| m.data.as_ref()) {
        Some(metric::Data::Sum(s)) => {
            assert!(s.is_monotonic, "{name} is a counter");
            &s.data_points
        }
        other => panic!("{name}: not a sum: {other:?} (have {:?})", m.keys()),
    }
}

pub fn dataplane_metrics(r: &Received) {
    let m = metrics(r, "kbng-dataplane");
    let packets = sum_points(&m, "kbng.dataplane.packets");
    let of = |dir: &str| {
        packets
            .iter()
            .find(|p| {
                attr(&p.attributes, "worker").as_deref() == Some("0")
                    && attr(&p.attributes, "direction").as_deref() == Some(dir)
            })
            .map_or(0, int)
    };
    assert!(of("up") >= 20, "worker 0 up: {}", of("up"));
    assert!(of("down") >= 1, "worker 0 down: {}", of("down"));
    let gold: i64 = sum_points(&m, "kbng.policer.packets")
        .iter()
        .filter(|p| attr(&p.attributes, "plan").as_deref() == Some("gold"))
        .map(int)
        .sum();
    assert!(gold >= 20, "policer packets of plan gold: {gold}");
    let vectors = sum_points(&m, "kbng.dataplane.node.vectors")
        .iter()
        .find(|p| attr(&p.attributes, "node").as_deref() == Some("graph"))
        .map_or(0, int);
    assert!(vectors >= 20, "graph vectors: {vectors}");
    assert!(!sum_points(&m, "kbng.dataplane.drops").is_empty());
}
