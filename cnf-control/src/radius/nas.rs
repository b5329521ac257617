//! Accounting-On and Accounting-Off (RFC 2866 §5.1): the NAS tells its accounting servers that
//! it starts or stops, so they can close the sessions they still hold open for it.
//!
//! kbng sessions outlive the control process (they are persisted and keep forwarding through a
//! restart), so "the NAS restarted" is only true when nothing carries on:
//! - Accounting-On is sent at start-up when no bound session was restored: anything a server
//!   holds open for this NAS is then stale. With restored sessions it is not sent, or the
//!   server would close sessions whose interims and Stop are still to come.
//! - Accounting-Off is sent at a clean shutdown when no session is left (after a drain, say).
//!   With live sessions it is not sent: the next control restores them and carries on.
//!
//! Both carry only the NAS's identity (NAS-Identifier, NAS-IP-Address), Acct-Status-Type,
//! Event-Timestamp and an Acct-Session-Id of their own, which RFC 2866 §5.5 requires of every
//! Accounting-Request and some servers key on.

use std::time::Duration;

use kbng_wire::radius::{attr, value};
use tokio::sync::{mpsc, oneshot};

use super::config::RadiusConfig;
use super::{RadiusCmd, Req};
use crate::core::session::NS_PER_SEC;

/// The Accounting-On (`off == false`) or Accounting-Off request at `now_ns` (Unix).
pub fn request(cfg: &RadiusConfig, off: bool, now_ns: u64) -> Req {
    let status = if off { value::ACCT_OFF } else { value::ACCT_ON };
    let secs = u32::try_from(now_ns / NS_PER_SEC).unwrap_or(u32::MAX);
    let mut attrs = vec![
        (attr::ACCT_STATUS_TYPE, status.to_be_bytes().to_vec()),
        (
            attr::ACCT_SESSION_ID,
            format!("{}-{secs:08x}", if off { "off" } else { "on" }).into_bytes(),
        ),
        (attr::NAS_IDENTIFIER, cfg.nas_identifier.as_bytes().to_vec()),
    ];
    if let Some(ip) = cfg.nas_ip {
        attrs.push((attr::NAS_IP_ADDRESS, ip.octets().to_vec()));
    }
    attrs.push((attr::EVENT_TIMESTAMP, secs.to_be_bytes().to_vec()));
    Req::Nas { off, attrs }
}

/// What became of the Accounting-Off at shutdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffOutcome {
    /// Sent; whether a server answered.
    Sent { answered: bool },
    /// Not sent: sessions carry on after a restart.
    SessionsRemain(usize),
    /// Accounting is not enabled.
    Disabled,
}

/// At a clean shutdown: send Accounting-Off if nothing carries on, and wait (bounded) for its
/// answer, so the process does not exit with it unsent.
pub async fn shutdown(tx: &mpsc::UnboundedSender<RadiusCmd>) {
    let (reply, rx) = oneshot::channel();
    if tx.send(RadiusCmd::Off { reply }).is_err() {
        tracing::warn!("RADIUS task gone: no Accounting-Off");
        return;
    }
    // The task bounds its own wait (Stops still waiting, then every server's retries); this
    // bound only guards against a task that never answers.
    match tokio::time::timeout(Duration::from_secs(20), rx).await {
        Ok(Ok(OffOutcome::Sent { answered: true })) => tracing::info!("RADIUS Accounting-Off sent"),
        Ok(Ok(OffOutcome::Sent { answered: false })) => {
            tracing::warn!("RADIUS Accounting-Off sent but no server answered")
        }
        Ok(Ok(OffOutcome::SessionsRemain(n))) => tracing::info!(
            sessions = n,
            "no RADIUS Accounting-Off: sessions carry on after a restart"
        ),
        Ok(Ok(OffOutcome::Disabled)) => {}
        Ok(Err(_)) | Err(_) => tracing::warn!("RADIUS Accounting-Off not confirmed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::radius::auth::tests::cfg;
    use crate::radius::client::Request;
    use kbng_wire::radius_auth::verify_accounting_style_request;

    #[test]
    fn on_and_off_name_the_nas_and_no_session() {
        for (off, status) in [(false, 7u32), (true, 8)] {
            let bytes = request(&cfg(), off, 1_700_000_000 * NS_PER_SEC)
                .build(4, [0; 16], b"s3cret")
                .unwrap();
            let p = verify_accounting_style_request(&bytes, b"s3cret").unwrap();
            assert_eq!(
                p.attr(attr::ACCT_STATUS_TYPE),
                Some(&status.to_be_bytes()[..])
            );
            assert_eq!(p.attr(attr::NAS_IDENTIFIER), Some(&b"kbng-test"[..]));
            assert_eq!(p.attr(attr::NAS_IP_ADDRESS), Some(&[192, 0, 2, 9][..]));
            assert!(p.attr(attr::ACCT_SESSION_ID).is_some());
            for session_attr in [
                attr::USER_NAME,
                attr::FRAMED_IP_ADDRESS,
                attr::ACCT_INPUT_OCTETS,
                attr::ACCT_SESSION_TIME,
                attr::CALLING_STATION_ID,
            ] {
                assert_eq!(p.attr(session_attr), None, "attribute {session_attr}");
            }
        }
    }
}
