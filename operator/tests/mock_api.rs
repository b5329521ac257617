//! Error paths against a mock API server (tower-test): what the reconcilers and the leader
//! Lease send, and what they do with conflicts and server errors. The happy paths and the
//! real API semantics are proven against a real kube-apiserver by tests/operator/run.sh.
#![allow(clippy::unwrap_used)]

use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use http::{Method, Request, Response, StatusCode};
use kbng_crds::{Bng, Licence};
use kbng_operator::config::WorkloadConfig;
use kbng_operator::lease::{LeaderLease, LeaseConfig};
use kbng_operator::reconcile::{Context, ReconcileError, bng, licence};
use kube::client::Body;
use kube::{Api, Client};
use tower_test::mock::{self, Handle};

type ApiHandle = Handle<Request<Body>, Response<Body>>;

fn mock_client() -> (Client, ApiHandle) {
    let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
    (Client::new(service, "default"), handle)
}

fn json(status: StatusCode, value: serde_json::Value) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::from(serde_json::to_vec(&value).unwrap()))
        .unwrap()
}

fn status_error(code: u16, reason: &str) -> Response<Body> {
    json(
        StatusCode::from_u16(code).unwrap(),
        serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": format!("mock {reason}"), "reason": reason, "code": code
        }),
    )
}

async fn body_json(req: Request<Body>) -> serde_json::Value {
    let bytes = req.into_body().collect_bytes().await.unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

fn context(client: Client) -> Arc<Context> {
    let key = ed25519_dalek::SigningKey::from_bytes(&[9; 32]).verifying_key();
    Arc::new(Context::new(
        client,
        key,
        WorkloadConfig::default(),
        Duration::from_secs(5),
        "test".into(),
    ))
}

fn sample_bng() -> Bng {
    let mut bng: Bng =
        serde_yaml_ng::from_str(include_str!("../../deploy/samples/bng.yaml")).unwrap();
    bng.metadata.uid = Some("uid-1".into());
    bng.metadata.resource_version = Some("41".into());
    bng.metadata.generation = Some(1);
    bng
}

fn lease_json(holder: &str, renewed: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "kbng-operator", "namespace": "kbng-system", "resourceVersion": "7"},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
                 "renewTime": renewed, "acquireTime": renewed, "leaseTransitions": 2}
    })
}

fn leader(client: Client, me: &str) -> LeaderLease {
    LeaderLease::new(
        Api::namespaced(client, "kbng-system"),
        LeaseConfig::new("kbng-operator".into(), me.into(), Duration::from_secs(15)),
    )
}

#[tokio::test]
async fn a_fresh_lease_of_another_holder_is_left_alone() {
    let (client, handle) = mock_client();
    let server = tokio::spawn(async move {
        let mut handle = pin!(handle);
        let (req, send) = handle.next_request().await.unwrap();
        assert_eq!(req.method(), Method::GET);
        assert_eq!(
            req.uri().path(),
            "/apis/coordination.k8s.io/v1/namespaces/kbng-system/leases/kbng-operator"
        );
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        send.send_response(json(StatusCode::OK, lease_json("other", &now)));
    });
    assert!(!leader(client, "me").try_acquire().await.unwrap());
    // No second request: the mock would hang a write, and the server task ends after one.
    server.await.unwrap();
}

#[tokio::test]
async fn losing_the_race_for_an_expired_lease_is_not_an_error() {
    let (client, handle) = mock_client();
    let server = tokio::spawn(async move {
        let mut handle = pin!(handle);
        let (_, send) = handle.next_request().await.unwrap();
        send.send_response(json(
            StatusCode::OK,
            lease_json("other", "2020-01-01T00:00:00.000000Z"),
        ));
        let (req, send) = handle.next_request().await.unwrap();
        assert_eq!(req.method(), Method::PUT);
        let body = body_json(req).await;
        assert_eq!(body["metadata"]["resourceVersion"], "7", "guarded write");
        assert_eq!(body["spec"]["holderIdentity"], "me");
        assert_eq!(body["spec"]["leaseTransitions"], 3);
        send.send_response(status_error(409, "Conflict"));
    });
    assert!(!leader(client, "me").try_acquire().await.unwrap());
    server.await.unwrap();
}

#[tokio::test]
async fn a_server_error_while_gathering_inputs_is_a_retryable_error() {
    let (client, handle) = mock_client();
    let server = tokio::spawn(async move {
        let mut handle = pin!(handle);
        let (req, send) = handle.next_request().await.unwrap();
        assert_eq!(
            req.uri().path(),
            "/apis/kbng.dev/v1alpha1/namespaces/kbng/licences/lab-licence"
        );
        send.send_response(status_error(500, "InternalError"));
    });
    let mut bng = sample_bng();
    bng.metadata.finalizers = Some(vec![bng::FINALIZER.into()]);
    let err = bng::reconcile(Arc::new(bng), context(client))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ReconcileError::Kube(kube::Error::Api(s)) if s.code == 500),
        "{err}"
    );
    server.await.unwrap();
}

#[tokio::test]
async fn the_finalizer_is_added_first_guarded_by_resource_version() {
    let (client, handle) = mock_client();
    let server = tokio::spawn(async move {
        let mut handle = pin!(handle);
        let (req, send) = handle.next_request().await.unwrap();
        assert_eq!(req.method(), Method::PATCH);
        assert_eq!(
            req.headers()["content-type"],
            "application/merge-patch+json"
        );
        let body = body_json(req).await;
        assert_eq!(
            body,
            serde_json::json!({"metadata": {"finalizers": ["kbng.dev/drain"], "resourceVersion": "41"}})
        );
        send.send_response(json(
            StatusCode::OK,
            serde_json::to_value(sample_bng()).unwrap(),
        ));
    });
    bng::reconcile(Arc::new(sample_bng()), context(client))
        .await
        .unwrap();
    server.await.unwrap();
}

#[tokio::test]
async fn a_forged_licence_is_written_invalid_with_an_event() {
    let (client, handle) = mock_client();
    let mut lic: Licence =
        serde_yaml_ng::from_str(include_str!("../../deploy/samples/licence.yaml")).unwrap();
    lic.metadata.generation = Some(1);
    let returned = serde_json::to_value(&lic).unwrap();
    let server = tokio::spawn(async move {
        let mut handle = pin!(handle);
        let (req, send) = handle.next_request().await.unwrap();
        assert_eq!(req.method(), Method::PATCH);
        assert_eq!(
            req.uri().path(),
            "/apis/kbng.dev/v1alpha1/namespaces/kbng/licences/lab-licence/status"
        );
        assert!(
            req.uri()
                .query()
                .unwrap()
                .contains("fieldManager=kbng-operator")
        );
        let body = body_json(req).await;
        // The sample is signed with the lab key, not with the key this context holds.
        assert_eq!(body["status"]["valid"], false);
        assert_eq!(body["status"]["reason"], "BadSignature");
        assert_eq!(body["status"]["maxSessions"], 64);
        assert_eq!(body["status"]["source"], "free-baseline");
        send.send_response(json(StatusCode::OK, returned));
        let (req, send) = handle.next_request().await.unwrap();
        assert_eq!(req.method(), Method::POST);
        assert_eq!(
            req.uri().path(),
            "/apis/events.k8s.io/v1/namespaces/kbng/events"
        );
        let body = body_json(req).await;
        assert_eq!(body["type"], "Warning");
        assert_eq!(body["reason"], "BadSignature");
        send.send_response(json(StatusCode::CREATED, body));
    });
    licence::reconcile(Arc::new(lic), context(client))
        .await
        .unwrap();
    server.await.unwrap();
}
