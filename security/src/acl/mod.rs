//! Kafka-model ACLs: what one is ([`model`]), the decision over all of
//! them ([`index`]), and where they are kept ([`store`]).

pub mod index;
pub mod model;
pub mod store;

pub use index::{Authorizer, AuthorizerConfig, Reason, Request, Verdict};
pub use model::{
    AclBinding, AclError, AclFilter, Host, Operation, PatternFilter, PatternType, Permission,
    Resource, ResourcePattern, ResourceType,
};
pub use store::AclStore;
