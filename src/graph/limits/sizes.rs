//! What a parsed document costs before it runs: its size once fragments
//! are spread (fields, root fields, depth, nested introspection lists), and
//! the memory it takes, for the document cache's weight.

use std::collections::HashMap;

use async_graphql::Name;
use async_graphql::parser::types::{ExecutableDocument, Selection, SelectionSet};

use super::INTROSPECTION_LISTS;

/// Most fields one operation may select once its fragments are spread. The
/// depth and complexity checks that follow walk every spread of every
/// fragment again, so a few kilobytes of nested spreads could otherwise keep
/// a core busy for minutes before any limit applies.
pub(crate) const MAX_EXPANDED_FIELDS: usize = 10_000;

/// The size of a selection once spread: every field (at any depth), the
/// fields at its own level, how deep it nests (fields inside fields, as
/// async-graphql counts depth), how many introspection list fields nest in
/// it, whether every field at its own level is an introspection field, and
/// how many `importGraph` fields it runs.
#[derive(Clone, Copy)]
pub(super) struct Size {
    pub(super) fields: usize,
    pub(super) imports: usize,
    pub(super) roots: usize,
    pub(super) depth: usize,
    pub(super) list_nesting: usize,
    pub(super) meta_only: bool,
}

impl Default for Size {
    fn default() -> Self {
        Self {
            fields: 0,
            imports: 0,
            roots: 0,
            depth: 0,
            list_nesting: 0,
            meta_only: true,
        }
    }
}

/// Sizes of selection sets, each fragment's computed once (memoized), so
/// this walk is linear in the document however often fragments are spread.
pub(super) struct Sizes<'a> {
    doc: &'a ExecutableDocument,
    fragments: HashMap<&'a str, Option<Size>>,
}

impl<'a> Sizes<'a> {
    pub(super) fn new(doc: &'a ExecutableDocument) -> Self {
        Self {
            doc,
            fragments: Default::default(),
        }
    }

    pub(super) fn of(&mut self, set: &'a SelectionSet) -> Size {
        let mut total = Size::default();
        for item in &set.items {
            let size = match &item.node {
                Selection::Field(field) => {
                    let inner = self.of(&field.node.selection_set.node);
                    let name = field.node.name.node.as_str();
                    let list = usize::from(INTROSPECTION_LISTS.contains(&name));
                    Size {
                        fields: 1 + inner.fields,
                        imports: usize::from(name == "importGraph") + inner.imports,
                        roots: 1,
                        depth: 1 + inner.depth,
                        list_nesting: list + inner.list_nesting,
                        meta_only: matches!(name, "__schema" | "__type" | "__typename"),
                    }
                }
                Selection::InlineFragment(f) => self.of(&f.node.selection_set.node),
                Selection::FragmentSpread(spread) => self.fragment(&spread.node.fragment_name.node),
            };
            total.fields = total.fields.saturating_add(size.fields);
            total.imports = total.imports.saturating_add(size.imports);
            total.roots = total.roots.saturating_add(size.roots);
            total.depth = total.depth.max(size.depth);
            total.list_nesting = total.list_nesting.max(size.list_nesting);
            total.meta_only &= size.meta_only;
        }
        total
    }

    fn fragment(&mut self, name: &'a Name) -> Size {
        match self.fragments.get(name.as_str()) {
            Some(Some(size)) => return *size,
            // A cycle: validation refuses it; count nothing more here.
            Some(None) => return Size::default(),
            None => {}
        }
        let Some(fragment) = self.doc.fragments.get(name) else {
            return Size::default();
        };
        self.fragments.insert(name.as_str(), None);
        let size = self.of(&fragment.node.selection_set.node);
        self.fragments.insert(name.as_str(), Some(size));
        size
    }
}

/// An estimate of the memory a parsed document takes: every selection,
/// argument and directive is a node of about [`NODE_BYTES`], besides the
/// names and values they carry.
pub(super) fn approx_bytes(doc: &ExecutableDocument) -> usize {
    fn set(selections: &SelectionSet) -> usize {
        selections
            .items
            .iter()
            .map(|item| {
                NODE_BYTES
                    + match &item.node {
                        Selection::Field(field) => {
                            let f = &field.node;
                            f.name.node.len()
                                + f.alias.as_ref().map_or(0, |a| a.node.len())
                                + f.arguments
                                    .iter()
                                    .map(|(name, value)| {
                                        NODE_BYTES + name.node.len() + value.node.to_string().len()
                                    })
                                    .sum::<usize>()
                                + f.directives.len() * NODE_BYTES
                                + set(&f.selection_set.node)
                        }
                        Selection::InlineFragment(f) => {
                            f.node.directives.len() * NODE_BYTES + set(&f.node.selection_set.node)
                        }
                        Selection::FragmentSpread(s) => {
                            s.node.fragment_name.node.len() + s.node.directives.len() * NODE_BYTES
                        }
                    }
            })
            .sum()
    }
    let operations: usize = doc
        .operations
        .iter()
        .map(|(_, op)| {
            NODE_BYTES
                + op.node.variable_definitions.len() * NODE_BYTES
                + set(&op.node.selection_set.node)
        })
        .sum();
    let fragments: usize = doc
        .fragments
        .values()
        .map(|f| NODE_BYTES + set(&f.node.selection_set.node))
        .sum();
    operations + fragments
}

/// Memory of one node of a parsed document, with its share of the vector
/// holding it (measured: a field with no arguments takes about this much).
const NODE_BYTES: usize = 256;
