//! Operation names as metric labels, bounded per source so that no client
//! can take them all: every name of the persisted-query manifest; up to 128
//! names of signed-in clients, each user introducing at most 4; up to 32
//! names of anonymous clients; `other` past that.

use std::collections::{HashMap, HashSet};

/// Operation names of signed-in clients kept as labels; past it, `other`
/// (clients name their operations, so the set must stay bounded).
const MAX_OPERATIONS: usize = 128;
/// Of them, how many one user may introduce: one client cannot take them all.
const NEW_OPERATIONS_PER_USER: usize = 4;
/// Operation names of anonymous clients kept as labels, apart from the
/// signed-in ones (an anonymous flood fills only these).
const MAX_ANONYMOUS_OPERATIONS: usize = 32;

/// Who named an operation, for [`super::Metrics::observe_request`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameSource {
    /// A signed-in client.
    User(crate::model::UserId),
    /// An anonymous client.
    Anonymous,
}

/// The operation names kept as labels, by where they came from.
#[derive(Default)]
pub(super) struct OperationNames {
    /// From the persisted-query manifest: always kept.
    pub(super) manifest: HashSet<String>,
    signed_in: HashSet<String>,
    anonymous: HashSet<String>,
    /// Names each user introduced (at most [`MAX_OPERATIONS`] users).
    introduced: HashMap<crate::model::UserId, usize>,
}

impl OperationNames {
    pub(super) fn label(&mut self, name: &str, source: NameSource) -> bool {
        if self.manifest.contains(name)
            || self.signed_in.contains(name)
            || self.anonymous.contains(name)
        {
            return true;
        }
        match source {
            NameSource::User(user) => {
                let introduced = self.introduced.entry(user).or_default();
                if self.signed_in.len() < MAX_OPERATIONS && *introduced < NEW_OPERATIONS_PER_USER {
                    *introduced += 1;
                    self.signed_in.insert(name.to_owned());
                    return true;
                }
                if *introduced == 0 {
                    self.introduced.remove(&user);
                }
                false
            }
            NameSource::Anonymous => {
                self.anonymous.len() < MAX_ANONYMOUS_OPERATIONS
                    && self.anonymous.insert(name.to_owned())
            }
        }
    }
}

/// A name usable as a label: letters, digits and `_`, at most 64.
pub(super) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}
