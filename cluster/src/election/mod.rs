//! Membership and the master's election on etcd (issue 39).
//!
//! The keys (all under `/tidelog/<name>/`, named in [`keys`]):
//! `nodes/<node_id>` (each node's entry, under its session's lease),
//! `epoch` (only grows, no lease), `master` (`{node_id, epoch}` under the
//! master's lease), `insync` (`{epoch, nodes}`, no lease).
//!
//! Invariants:
//! - **One master per epoch.** A campaign is one txn: it succeeds only if
//!   `master` is absent (create revision 0) and `epoch` is unchanged since
//!   the campaigner read it (mod revision), and then puts `master` under
//!   the campaigner's lease and `epoch + 1`. Two campaigns from one read
//!   cannot both pass; a campaign from an old read fails on the epoch.
//! - **Fencing.** A master's key lives as long as its lease; its session
//!   knows an instant before which the lease is certainly alive
//!   ([`session`]) and a master acknowledges nothing past it, so it stops
//!   before another node can win the key.
//! - **Only the master writes the in-sync set**, in a txn that compares
//!   the master key's create revision and value to its own term's: a
//!   deposed master's write changes nothing.
//! - **Who campaigns** ([`eligibility`]): members of the last in-sync set,
//!   the longest log first.
//! - Every value read from etcd is bounded and checked before use
//!   ([`records`]).
//!
//! Files: [`keys`], [`records`], [`session`] (lease, entry, renewals,
//! fencing), [`view`] (one consistent read), [`campaign`] (the writes),
//! [`eligibility`] (the pure rule), [`step`] (one step of a node's loop).

pub mod campaign;
pub mod eligibility;
pub mod keys;
pub mod records;
pub mod session;
pub mod step;
pub mod view;

pub use campaign::{CampaignOutcome, Election, InsyncChange, MasterTerm, CAMPAIGN_GRACE};
pub use eligibility::{campaign_turn, should_campaign, CampaignTurn};
pub use keys::Keys;
pub use records::{InsyncSet, MasterRecord, NodeInfo};
pub use session::{fencing_deadline, Session, SessionState};
pub use step::{Step, StepResult};
pub use view::{ClusterView, EpochSeen, MasterHeld};
