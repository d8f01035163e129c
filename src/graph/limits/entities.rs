//! What a gateway's `_entities` costs. It resolves its selection once per
//! representation, where async-graphql's complexity counts the selection
//! once; so the representations times an estimate of the selection's cost
//! must stay within `KITH_MAX_QUERY_COMPLEXITY`. The estimate counts each
//! field once, and a field with a page (`first` or `last`, or an `edges`
//! or `nodes` selection: 20 by default) its children once per row, as the
//! list fields' complexity does.

use std::collections::HashSet;

use async_graphql::parser::types::{ExecutableDocument, Field, Selection, SelectionSet};
use async_graphql::{Positioned, ServerResult, Value, Variables};

use super::refuse;
use crate::graph::page_args::{DEFAULT_PAGE, MAX_PAGE};

/// Refuses the `_entities` fields of `doc` when their representations times
/// their selections' costs exceed `max_complexity` together.
pub(super) fn check(
    doc: &ExecutableDocument,
    fields: &[Positioned<Field>],
    variables: &Variables,
    max_complexity: usize,
) -> ServerResult<()> {
    let mut total = 0usize;
    for field in fields {
        let representations = match argument(field, "representations", variables) {
            Some(Value::List(items)) => items.len(),
            // Validation reports a missing or mistyped argument.
            _ => continue,
        };
        let mut walk = Walk {
            doc,
            variables,
            open: HashSet::new(),
        };
        let per_entity = walk.cost(&field.node.selection_set.node).max(1);
        total = total.saturating_add(representations.saturating_mul(per_entity));
        if total > max_complexity {
            return Err(refuse(
                format!(
                    "`_entities` resolves its selection (cost {per_entity}) once for each \
                     of its {representations} representations; at most {max_complexity} in \
                     all: ask for fewer at once, or for less of each"
                ),
                Some(field.pos),
            ));
        }
    }
    Ok(())
}

/// `name`'s value on `field`, its variables resolved.
fn argument(field: &Positioned<Field>, name: &str, variables: &Variables) -> Option<Value> {
    let (_, value) = field
        .node
        .arguments
        .iter()
        .find(|(n, _)| n.node.as_str() == name)?;
    value
        .node
        .clone()
        .into_const_with(|var| variables.get(&var).cloned().ok_or(()))
        .ok()
}

struct Walk<'a> {
    doc: &'a ExecutableDocument,
    variables: &'a Variables,
    /// The fragments being spread (a cycle counts nothing more; validation
    /// refuses it).
    open: HashSet<&'a str>,
}

impl<'a> Walk<'a> {
    /// The estimated cost of `set`: bounded, as the document already passed
    /// the limit on fields once fragments are spread.
    fn cost(&mut self, set: &'a SelectionSet) -> usize {
        let mut total = 0usize;
        for item in &set.items {
            let cost = match &item.node {
                Selection::Field(field) => {
                    let inner = self.cost(&field.node.selection_set.node);
                    1 + inner.saturating_mul(self.rows(field))
                }
                Selection::InlineFragment(f) => self.cost(&f.node.selection_set.node),
                Selection::FragmentSpread(spread) => {
                    let name = spread.node.fragment_name.node.as_str();
                    match self.doc.fragments.get(name) {
                        Some(fragment) if self.open.insert(name) => {
                            let cost = self.cost(&fragment.node.selection_set.node);
                            self.open.remove(name);
                            cost
                        }
                        _ => 0,
                    }
                }
            };
            total = total.saturating_add(cost);
        }
        total
    }

    /// The rows a field's children are resolved for: its page size if it
    /// has one, else 1.
    fn rows(&self, field: &Positioned<Field>) -> usize {
        for name in ["first", "last"] {
            if let Some(Value::Number(n)) = argument(field, name, self.variables) {
                let n = n.as_i64().unwrap_or(i64::from(MAX_PAGE));
                return n.clamp(1, i64::from(MAX_PAGE)) as usize;
            }
        }
        let pages = field.node.selection_set.node.items.iter().any(|item| {
            matches!(&item.node, Selection::Field(f)
                if matches!(f.node.name.node.as_str(), "edges" | "nodes"))
        });
        if pages { DEFAULT_PAGE as usize } else { 1 }
    }
}
