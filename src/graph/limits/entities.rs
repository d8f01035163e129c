//! What a gateway's `_entities` costs. It resolves its selection once per
//! representation, where async-graphql's complexity counts the selection
//! once; so a call takes at most [`MAX_ENTITIES`] representations (as
//! `users(ids)` takes ids), and the representations times the selection's
//! cost must stay within `KITH_MAX_QUERY_COMPLEXITY`. The selection's cost
//! is reckoned as the schema reckons it: each field 1 and its children, a
//! page of a list field its rows times its children and the rows its
//! `offset` skips, an intersection its walk ([`LIST_FIELDS`]).

use std::collections::HashMap;

use async_graphql::parser::types::{ExecutableDocument, Field, Selection, SelectionSet};
use async_graphql::{Positioned, ServerResult, Value, Variables};

use super::refuse;
use crate::graph::page_args::{intersection_cost, page_cost};
use crate::graph::relation::KNOWN_FOLLOWERS_COUNT_COST;

/// Most representations one `_entities` call resolves, as many ids as
/// `users(ids)` takes.
pub(crate) const MAX_ENTITIES: usize = 100;

/// How a list field of `User` is charged (the complexity its resolver
/// declares).
#[derive(Clone, Copy)]
enum Charge {
    /// A page of a list: `first`/`last`, and `offset`.
    Page,
    /// A page of a list read after a walk of bounded length.
    Intersection,
    /// A count read after a bounded walk.
    KnownCount,
}

/// The fields of `User` not charged as 1 plus their children (a test keeps
/// this table in step with the schema).
const LIST_FIELDS: &[(&str, Charge)] = &[
    ("following", Charge::Page),
    ("followers", Charge::Page),
    ("blocking", Charge::Page),
    ("muting", Charge::Page),
    ("closeFriends", Charge::Page),
    ("followRequests", Charge::Page),
    ("sentFollowRequests", Charge::Page),
    ("suggestedFollows", Charge::Intersection),
    ("commonFollowing", Charge::Intersection),
    ("knownFollowers", Charge::Intersection),
    ("knownFollowersCount", Charge::KnownCount),
];

/// Refuses the `_entities` fields of `doc` that take too many
/// representations, or whose representations times their selections' cost
/// exceed `max_complexity` together.
pub(super) fn check(
    doc: &ExecutableDocument,
    fields: &[Positioned<Field>],
    variables: &Variables,
    max_complexity: usize,
) -> ServerResult<()> {
    let mut walk = Walk {
        doc,
        variables,
        fragments: HashMap::new(),
    };
    let mut total = 0usize;
    for field in fields {
        let representations = match argument(field, "representations", variables) {
            Some(Value::List(items)) => items.len(),
            // Validation reports a missing or mistyped argument.
            _ => continue,
        };
        if representations > MAX_ENTITIES {
            return Err(refuse(
                format!(
                    "`_entities` takes at most {MAX_ENTITIES} representations; it was sent \
                     {representations}"
                ),
                Some(field.pos),
            ));
        }
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

/// An integer argument of `field` (`None`: absent or not an integer).
fn int_argument(field: &Positioned<Field>, name: &str, variables: &Variables) -> Option<i32> {
    match argument(field, name, variables) {
        Some(Value::Number(n)) => n
            .as_i64()
            .map(|n| i32::try_from(n).unwrap_or(if n < 0 { i32::MIN } else { i32::MAX })),
        _ => None,
    }
}

struct Walk<'a> {
    doc: &'a ExecutableDocument,
    variables: &'a Variables,
    /// Each fragment's cost, reckoned once however often it is spread
    /// (`None` while it is being reckoned: a cycle counts nothing more,
    /// and validation refuses it).
    fragments: HashMap<&'a str, Option<usize>>,
}

impl<'a> Walk<'a> {
    /// The cost of `set`, each field charged as its resolver is.
    fn cost(&mut self, set: &'a SelectionSet) -> usize {
        let mut total = 0usize;
        for item in &set.items {
            let cost = match &item.node {
                Selection::Field(field) => {
                    let children = self.cost(&field.node.selection_set.node);
                    self.charge(field, children)
                }
                Selection::InlineFragment(f) => self.cost(&f.node.selection_set.node),
                Selection::FragmentSpread(spread) => {
                    self.fragment(spread.node.fragment_name.node.as_str())
                }
            };
            total = total.saturating_add(cost);
        }
        total
    }

    fn fragment(&mut self, name: &'a str) -> usize {
        match self.fragments.get(name) {
            Some(Some(cost)) => return *cost,
            Some(None) => return 0,
            None => {}
        }
        let Some(fragment) = self.doc.fragments.get(name) else {
            return 0;
        };
        self.fragments.insert(name, None);
        let cost = self.cost(&fragment.node.selection_set.node);
        self.fragments.insert(name, Some(cost));
        cost
    }

    /// What `field` costs with `children` below it.
    fn charge(&self, field: &Positioned<Field>, children: usize) -> usize {
        let name = field.node.name.node.as_str();
        let Some((_, charge)) = LIST_FIELDS.iter().find(|(n, _)| *n == name) else {
            return 1usize.saturating_add(children);
        };
        let int = |arg| int_argument(field, arg, self.variables);
        match charge {
            Charge::Page => page_cost(int("first"), int("last"), int("offset"), children),
            Charge::Intersection => intersection_cost(int("first"), int("last"), children),
            Charge::KnownCount => KNOWN_FOLLOWERS_COUNT_COST,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every field of `User` that returns a list, or declares a complexity
    /// of its own, is in [`LIST_FIELDS`].
    #[test]
    fn every_list_field_of_user_is_charged_as_its_resolver_is() {
        let sdl = crate::graph::sdl();
        let user = sdl
            .split("\ntype User implements Node")
            .nth(1)
            .and_then(|rest| rest.split("\n}").next())
            .expect("type User in the schema");
        let doc = async_graphql::parser::parse_schema(format!(
            "type User {user}\n}}\nscalar Count\nscalar DateTime"
        ))
        .expect("User parses alone");
        let mut lists = Vec::new();
        for definition in &doc.definitions {
            let async_graphql::parser::types::TypeSystemDefinition::Type(ty) = definition else {
                continue;
            };
            let async_graphql::parser::types::TypeKind::Object(object) = &ty.node.kind else {
                continue;
            };
            for field in &object.fields {
                let ty = field.node.ty.node.to_string();
                if ty.contains("Connection") || ty.starts_with('[') || ty.contains("BoundedCount") {
                    lists.push(field.node.name.node.to_string());
                }
            }
        }
        assert!(lists.len() >= 9, "{lists:?}");
        for name in &lists {
            assert!(
                LIST_FIELDS.iter().any(|(n, _)| n == name),
                "User.{name} is a list: charge it in LIST_FIELDS"
            );
        }
    }
}
