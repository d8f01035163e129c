//! Limits on what one document may ask for, checked on the parsed document
//! before async-graphql's own depth walk and validation, and long before any
//! resolver runs — so a hostile
//! request is refused without a single database statement. Complexity
//! (page sizes times the cost of a row, offsets by the rows they skip) and
//! depth are checked by async-graphql's validation right after.

use std::sync::Arc;

use async_graphql::parser::types::{
    DocumentOperations, ExecutableDocument, Field, OperationType, Selection, SelectionSet,
};
use async_graphql::{Name, Pos, Positioned, Request, ServerError, ServerResult, Value, Variables};

use crate::config::Config;

/// Parsed documents of recent requests that passed the limits, by query
/// text (clients send the same few texts over and over; parsing is a
/// visible share of a request's CPU). One per process, in
/// [`crate::app::App::documents`].
pub type Documents = moka::sync::Cache<String, Arc<ExecutableDocument>>;

/// An empty document cache, bounded by the query text it holds.
pub fn documents() -> Documents {
    moka::sync::Cache::builder()
        .max_capacity(DOCUMENT_CACHE_BYTES)
        .weigher(|query: &String, _| u32::try_from(query.len()).unwrap_or(u32::MAX))
        .build()
}

/// The limits, from the configuration, and the process's parsed documents.
#[derive(Clone)]
pub struct Limits {
    documents: Documents,
    /// Most aliased fields in one document.
    pub max_aliases: usize,
    /// Most root fields in one operation (fragments at the root counted).
    pub max_root_fields: usize,
    /// Deepest `offset` argument.
    pub max_offset: i32,
}

impl Limits {
    /// The configured limits, keeping parsed documents in `documents`.
    pub fn new(config: &Config, documents: Documents) -> Self {
        Self {
            documents,
            max_aliases: config.max_aliases,
            max_root_fields: config.max_root_fields,
            max_offset: config.max_offset,
        }
    }

    fn check(&self, doc: &ExecutableDocument, variables: &Variables) -> ServerResult<()> {
        // Variables as the operations see them: defaults fill what was not sent.
        let mut effective = variables.clone();
        for (_, operation) in doc.operations.iter() {
            for definition in &operation.node.variable_definitions {
                let name = &definition.node.name.node;
                if !effective.contains_key(name)
                    && let Some(default) = &definition.node.default_value
                {
                    effective.insert(name.clone(), default.node.clone());
                }
            }
        }
        let mut aliases = 0;
        let mut first_alias = None;
        let mut visit = |field: &Positioned<Field>| -> ServerResult<()> {
            if field.node.alias.is_some() {
                aliases += 1;
                first_alias.get_or_insert(field.pos);
            }
            self.check_offset(field, &effective)
        };
        for (_, operation) in doc.operations.iter() {
            walk(&operation.node.selection_set.node, &mut visit)?;
        }
        for fragment in doc.fragments.values() {
            walk(&fragment.node.selection_set.node, &mut visit)?;
        }
        if aliases > self.max_aliases {
            return Err(refuse(
                format!(
                    "the document has {aliases} aliased fields; at most {} are allowed",
                    self.max_aliases
                ),
                first_alias,
            ));
        }
        let mut sizes = Sizes::new(doc);
        for (_, operation) in doc.operations.iter() {
            let size = sizes.of(&operation.node.selection_set.node);
            if size.fields > MAX_EXPANDED_FIELDS {
                return Err(refuse(
                    format!(
                        "the operation selects more than {MAX_EXPANDED_FIELDS} fields once its \
                         fragments are spread"
                    ),
                    Some(operation.pos),
                ));
            }
            if size.roots > self.max_root_fields {
                return Err(refuse(
                    format!(
                        "the operation selects {} root fields; at most {} are allowed",
                        size.roots, self.max_root_fields
                    ),
                    Some(operation.pos),
                ));
            }
        }
        Ok(())
    }

    fn check_offset(&self, field: &Positioned<Field>, variables: &Variables) -> ServerResult<()> {
        let Some((_, value)) = field
            .node
            .arguments
            .iter()
            .find(|(name, _)| name.node.as_str() == "offset")
        else {
            return Ok(());
        };
        let resolved = value
            .node
            .clone()
            .into_const_with(|name| variables.get(&name).cloned().ok_or(()));
        let number = match resolved {
            Ok(Value::Number(n)) => n.as_i64(),
            _ => None,
        };
        match number {
            Some(n) if n < 0 || n > i64::from(self.max_offset) => Err(refuse(
                format!(
                    "`offset` must be between 0 and {}; page deeper with `after` cursors",
                    self.max_offset
                ),
                Some(value.pos),
            )),
            _ => Ok(()),
        }
    }
}

fn refuse(message: String, pos: Option<Pos>) -> ServerError {
    let mut error = ServerError::new(message, pos);
    error
        .extensions
        .get_or_insert_with(Default::default)
        .set("code", "INVALID_INPUT");
    error
}

fn walk(
    set: &SelectionSet,
    visit: &mut impl FnMut(&Positioned<Field>) -> ServerResult<()>,
) -> ServerResult<()> {
    for item in &set.items {
        match &item.node {
            Selection::Field(field) => {
                visit(field)?;
                walk(&field.node.selection_set.node, visit)?;
            }
            Selection::InlineFragment(fragment) => {
                walk(&fragment.node.selection_set.node, visit)?;
            }
            // Fragment definitions are walked once, on their own.
            Selection::FragmentSpread(_) => {}
        }
    }
    Ok(())
}

/// Most fields one operation may select once its fragments are spread. The
/// depth and complexity checks that follow walk every spread of every
/// fragment again, so a few kilobytes of nested spreads could otherwise keep
/// a core busy for minutes before any limit applies.
pub const MAX_EXPANDED_FIELDS: usize = 10_000;

/// The size of a selection once spread: every field (at any depth) and the
/// fields at its own level.
#[derive(Clone, Copy, Default)]
struct Size {
    fields: usize,
    roots: usize,
}

/// Sizes of selection sets, each fragment's computed once (memoized), so
/// this walk is linear in the document however often fragments are spread.
struct Sizes<'a> {
    doc: &'a ExecutableDocument,
    fragments: std::collections::HashMap<&'a str, Option<Size>>,
}

impl<'a> Sizes<'a> {
    fn new(doc: &'a ExecutableDocument) -> Self {
        Self {
            doc,
            fragments: Default::default(),
        }
    }

    fn of(&mut self, set: &'a SelectionSet) -> Size {
        let mut total = Size::default();
        for item in &set.items {
            let size = match &item.node {
                Selection::Field(field) => Size {
                    fields: 1 + self.of(&field.node.selection_set.node).fields,
                    roots: 1,
                },
                Selection::InlineFragment(f) => self.of(&f.node.selection_set.node),
                Selection::FragmentSpread(spread) => self.fragment(&spread.node.fragment_name.node),
            };
            total.fields = total.fields.saturating_add(size.fields);
            total.roots = total.roots.saturating_add(size.roots);
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

/// Query text the document cache may hold, in bytes (parsed documents take
/// a small multiple of their text).
const DOCUMENT_CACHE_BYTES: u64 = 8 * 1024 * 1024;

/// Longest query text the document cache keeps.
const MAX_CACHED_QUERY_BYTES: usize = 16 * 1024;

impl Limits {
    /// Admits `request`: its document — from the process's cache when its
    /// text was seen before, else parsed now — must fit the limits. The
    /// document is handed to the executor parsed, so async-graphql does not
    /// parse it again. Done outside async-graphql's extension hooks: any
    /// extension sends every field of every request down the executor's
    /// slow path (a `ResolveInfo` and an extension chain per field).
    pub fn admit(&self, request: &mut Request) -> ServerResult<Admitted> {
        let (doc, cached) = match self.documents.get(&request.query) {
            Some(doc) => (doc, true),
            None => (
                Arc::new(async_graphql::parser::parse_query(&request.query)?),
                false,
            ),
        };
        self.check(&doc, &request.variables)?;
        // Only documents that passed, and only ordinary-sized ones: the cache
        // is for the few texts clients send again and again, not for every
        // text a client can make up.
        if !cached && request.query.len() <= MAX_CACHED_QUERY_BYTES {
            self.documents.insert(request.query.clone(), doc.clone());
        }
        let admitted = Admitted::of(&doc, request.operation_name.as_deref());
        request.set_parsed_query(ExecutableDocument::clone(&doc));
        Ok(admitted)
    }
}

/// What an admitted document's selected operation is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Admitted {
    /// Its name (also the one operation of a document that names it).
    pub operation: Option<String>,
    /// Its type, `None` when the document has no such operation (the
    /// executor refuses it).
    pub ty: Option<OperationType>,
}

impl Admitted {
    /// The operation of `doc` a request naming `name` (or none) selects.
    pub fn of(doc: &ExecutableDocument, name: Option<&str>) -> Self {
        let selected = match (&doc.operations, name) {
            (DocumentOperations::Single(op), None) => Some((None, op)),
            (DocumentOperations::Multiple(ops), Some(name)) => {
                ops.get(name).map(|op| (Some(name.to_owned()), op))
            }
            (DocumentOperations::Multiple(ops), None) if ops.len() == 1 => {
                ops.iter().next().map(|(n, op)| (Some(n.to_string()), op))
            }
            _ => None,
        };
        match selected {
            Some((operation, op)) => Self {
                operation,
                ty: Some(op.node.ty),
            },
            None => Self::default(),
        }
    }
}
