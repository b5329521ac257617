//! The bearer token of a BNG's control API: a random Secret the operator makes once, mounted
//! into the control pod (its `apiTokenFile`) and read back whenever the operator calls that
//! API. Made with a create, never an apply: a reconcile must not replace a token the running
//! control already holds. Owned by the BNG, so it goes with it.

use std::io::Read as _;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kbng_crds::Bng;
use kube::api::PostParams;
use kube::{Api, Client, Resource, ResourceExt};

use crate::binaries::control::{API_TOKEN_KEY, api_token_secret};
use crate::build::{BNG_LABEL, FIELD_MANAGER};

/// 32 bytes from the kernel's generator, hex.
fn random_token() -> std::io::Result<String> {
    let mut b = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// The token of `bng`'s control API, making its Secret first when it does not exist yet.
pub async fn ensure(client: &Client, ns: &str, bng: &Bng) -> Result<Option<String>, kube::Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), ns);
    let name = api_token_secret(&bng.name_any());
    if let Some(existing) = api.get_opt(&name).await? {
        return Ok(token_of(existing));
    }
    let token = random_token().map_err(|e| kube::Error::Service(Box::new(e)))?;
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name),
            namespace: Some(ns.to_string()),
            labels: Some(
                [
                    (BNG_LABEL.to_string(), bng.name_any()),
                    (
                        "app.kubernetes.io/managed-by".to_string(),
                        FIELD_MANAGER.to_string(),
                    ),
                ]
                .into(),
            ),
            owner_references: bng.controller_owner_ref(&()).map(|o| vec![o]),
            ..Default::default()
        },
        data: Some(
            [(
                API_TOKEN_KEY.to_string(),
                ByteString(token.clone().into_bytes()),
            )]
            .into(),
        ),
        ..Secret::default()
    };
    match api.create(&PostParams::default(), &secret).await {
        Ok(_) => Ok(Some(token)),
        // Made meanwhile (another replica before it lost the lease): keep that one.
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(read(client, ns, &bng.name_any()).await),
        Err(e) => Err(e),
    }
}

/// The token the operator presents to `bng`'s control, if its Secret exists.
pub async fn read(client: &Client, ns: &str, bng: &str) -> Option<String> {
    let api: Api<Secret> = Api::namespaced(client.clone(), ns);
    token_of(api.get_opt(&api_token_secret(bng)).await.ok()??)
}

fn token_of(secret: Secret) -> Option<String> {
    String::from_utf8(secret.data?.remove(API_TOKEN_KEY)?.0).ok()
}
