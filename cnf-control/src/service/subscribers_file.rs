//! The engine task's side of the subscribers file: a reread content put in force with the
//! API's changes laid over it, rejected, or held for the records it would remove
//! (`crate::subscribers_guard`), and a held one accepted.

use super::{AcceptedFile, Batch, Running};
use crate::core::subscriber_page::{Page, RecordKey};
use crate::store::StoreOp;
use crate::store::subscribers::Overlay;
use crate::subscribers_file::{FileEvent, Loaded};
use crate::subscribers_guard::{Held, mass_removal};

/// Records in force looked at per page of the held content's removals: a page holds the
/// engine task for about a millisecond, whatever share of the store the content removes.
const HELD_SCAN: usize = 10_000;

impl Running {
    pub(super) fn subscribers_file(&mut self, e: FileEvent, b: &mut Batch) {
        let mut loaded = match e {
            FileEvent::Changed(l) => l,
            FileEvent::Rejected(problem) => {
                tracing::error!(
                    "subscribers file changed but cannot be used; the records in force stay: \
                     {problem}"
                );
                self.engine.subscribers_file_rejected();
                self.subscribers_file.rejected = Some(problem);
                self.subscribers_file.report();
                return;
            }
            FileEvent::InForce => {
                // Back to the content last read: in force, or held as it was.
                tracing::info!("subscribers file: back to the content last read");
                self.subscribers_file.rejected = None;
                self.subscribers_file.report();
                return;
            }
        };
        self.subscribers_file.rejected = None;
        self.subscribers_file.held = None;
        for row in &loaded.unresolved {
            tracing::warn!("subscribers: {row}");
        }
        self.lay_overlay(&mut loaded.store);
        let removed = self.engine.subscribers.missing_from(&loaded.store);
        let in_force = self.engine.subscribers.len();
        let max = self.cfg.subscribers_max_removal_percent;
        if let Some(why) = mass_removal(removed, in_force, max) {
            tracing::error!("subscribers file changed: {why}");
            self.engine.subscribers_file_held();
            self.subscribers_file.held = Some(Held {
                loaded,
                removed,
                why,
            });
        } else {
            self.put_file_in_force(loaded, removed, b);
        }
        self.subscribers_file.report();
    }

    /// A page of the records in force that the held content lacks, and how many there are
    /// (`None`: nothing is held).
    pub(super) fn held_removals(
        &self,
        after: Option<&RecordKey>,
        limit: usize,
    ) -> Option<(Page, usize)> {
        let held = self.subscribers_file.held.as_ref()?;
        let page = self
            .engine
            .subscribers
            .page_where(after, limit, HELD_SCAN, |k| {
                held.loaded.store.get(k).is_none()
            });
        Some((page, held.removed))
    }

    /// The held content in force, the API's changes since laid over it again.
    pub(super) fn accept_subscribers_file(
        &mut self,
        b: &mut Batch,
    ) -> Result<AcceptedFile, String> {
        if let Some(why) = &self.subscribers_file.rejected {
            return Err(format!(
                "the file's present content is rejected ({why}); it is not the held one"
            ));
        }
        let Some(mut held) = self.subscribers_file.held.take() else {
            return Err("no subscribers file content is held".into());
        };
        self.lay_overlay(&mut held.loaded.store);
        let removed = self.engine.subscribers.missing_from(&held.loaded.store);
        tracing::warn!(
            removed,
            "subscribers file: held content accepted by an operator"
        );
        let records = held.loaded.store.len();
        self.put_file_in_force(held.loaded, removed, b);
        self.subscribers_file.report();
        Ok(AcceptedFile { records, removed })
    }

    /// The API's changes laid over a file's records (again, when held: idempotent).
    fn lay_overlay(&mut self, store: &mut crate::core::aaa::SubscriberStore) {
        let overlay = self.subscriber_overlay.get_or_insert_with(Overlay::default);
        for problem in overlay.apply_to(&self.engine.subscribers, store) {
            tracing::warn!("subscribers: {problem}");
        }
    }

    /// In force, and kept as the content in force for the next start to compare with.
    fn put_file_in_force(&mut self, loaded: Loaded, removed: usize, b: &mut Batch) {
        tracing::info!(
            records = loaded.records,
            removed,
            api_changes = self.subscriber_overlay.as_ref().map_or(0, Overlay::len),
            "subscribers file changed: its records are in force, with the API's changes over them"
        );
        b.store.push(StoreOp::SubscribersFile(loaded.text));
        self.engine.replace_subscribers(loaded.store);
    }
}
