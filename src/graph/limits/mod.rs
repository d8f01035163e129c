//! Limits on what one document may ask for, checked long before any
//! resolver runs — so a hostile request is refused without a single
//! database statement:
//!
//! - the query text's length (`KITH_MAX_QUERY_BYTES`), before it is parsed:
//!   parsing takes far more memory and time than the text's size;
//! - aliases, root fields, `offset`s, the number of fields once fragments
//!   are spread, and depth (`KITH_MAX_QUERY_DEPTH`), on the parsed document;
//! - complexity (page sizes times the cost of a row, offsets by the rows
//!   they skip), by async-graphql's validation right after; a gateway's
//!   `_entities` here, as its representations times its selection's cost
//!   (`entities`), since async-graphql counts the selection once.
//!
//! An introspection query — every root field `__schema`, `__type` or
//! `__typename`, no aliases — may nest deeper than other documents, up to
//! [`INTROSPECTION_MAX_DEPTH`] levels, because the standard ones of
//! graphql-js, GraphiQL and Apollo do (a type reference is unwrapped seven
//! to nine `ofType`s deep). A document that is not an introspection query
//! gets no exemption. What makes an introspection answer large is lists
//! inside lists (`types { fields { type { fields … } } }`), so in any
//! document the introspection lists nest at most
//! [`INTROSPECTION_LIST_NESTING`] deep and are never aliased, nor is
//! `__schema` (no other type of the schema has fields of their names).
//! `KITH_INTROSPECTION=false` refuses introspection altogether
//! (`INTROSPECTION_DISABLED`), and the subgraph's `_service { sdl }` with
//! it: a gateway composes from the committed `schema.subgraph.graphql`.

use std::sync::Arc;

use async_graphql::parser::types::{
    DocumentOperations, ExecutableDocument, Field, OperationType, Selection, SelectionSet,
};
use async_graphql::{Pos, Positioned, Request, ServerError, ServerResult, Value, Variables};

use crate::config::Config;
use crate::error::ErrorCode;

mod entities;
mod sizes;

#[cfg(test)]
pub(crate) use entities::MAX_ENTITIES;
pub(crate) use sizes::MAX_EXPANDED_FIELDS;
use sizes::{Sizes, approx_bytes};

/// Parsed documents of recent requests that passed validation, by query
/// text (clients send the same few texts over and over; parsing is a
/// visible share of a request's CPU). One per process, in
/// [`crate::graph::state::Operations::documents`].
pub(crate) type Documents = moka::sync::Cache<String, Arc<ExecutableDocument>>;

/// An empty document cache, bounded by an estimate of the memory its parsed
/// documents take (not by their text, which is far smaller).
pub(crate) fn documents() -> Documents {
    moka::sync::Cache::builder()
        .max_capacity(DOCUMENT_CACHE_BYTES)
        .weigher(|query: &String, doc: &Arc<ExecutableDocument>| {
            u32::try_from(query.len() + approx_bytes(doc)).unwrap_or(u32::MAX)
        })
        .build()
}

/// Deepest an introspection query may nest (graphql-js 17 unwraps type
/// references nine `ofType`s deep: 14 levels).
pub(crate) const INTROSPECTION_MAX_DEPTH: usize = 24;

/// Most list fields of the introspection types nested inside one another
/// (`types { fields { args } }` is three).
pub(crate) const INTROSPECTION_LIST_NESTING: usize = 3;

/// The list fields of the introspection types.
const INTROSPECTION_LISTS: [&str; 8] = [
    "types",
    "directives",
    "fields",
    "args",
    "inputFields",
    "interfaces",
    "possibleTypes",
    "enumValues",
];

/// The limits, from the configuration, and the process's parsed documents.
#[derive(Clone)]
pub(crate) struct Limits {
    documents: Documents,
    /// Most aliased fields in one document.
    pub max_aliases: usize,
    /// Most root fields in one operation (fragments at the root counted).
    pub max_root_fields: usize,
    /// Deepest `offset` argument.
    pub max_offset: i32,
    /// Deepest selection (introspection queries aside).
    pub max_depth: usize,
    /// Longest query text, bytes.
    pub max_query_bytes: usize,
    /// Whether introspection is answered.
    pub introspection: bool,
    /// Most complexity one document may have.
    pub max_complexity: usize,
}

impl Limits {
    /// The configured limits, keeping parsed documents in `documents`.
    pub(crate) fn new(config: &Config, documents: Documents) -> Self {
        Self {
            documents,
            max_aliases: config.limits.max_aliases,
            max_root_fields: config.limits.max_root_fields,
            max_offset: config.limits.max_offset,
            max_depth: config.limits.max_query_depth,
            max_query_bytes: config.limits.max_query_bytes,
            introspection: config.limits.introspection,
            max_complexity: config.limits.max_query_complexity,
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
        let mut entities = Vec::new();
        let mut visit = |field: &Positioned<Field>| -> ServerResult<()> {
            let name = field.node.name.node.as_str();
            if field.node.alias.is_some() {
                aliases += 1;
                first_alias.get_or_insert(field.pos);
                // An aliased introspection list (or a second whole
                // `__schema`) multiplies the answer.
                if name == "__schema" || INTROSPECTION_LISTS.contains(&name) {
                    return Err(refuse(
                        format!("`{name}` may not be aliased"),
                        Some(field.pos),
                    ));
                }
            }
            if name == "_entities" {
                entities.push(field.clone());
            }
            // `_service` answers the whole schema, as introspection does.
            if !self.introspection && matches!(name, "__schema" | "__type" | "_service") {
                let mut error = ServerError::new("introspection is disabled", Some(field.pos));
                error
                    .extensions
                    .get_or_insert_with(Default::default)
                    .set("code", ErrorCode::IntrospectionDisabled.as_str());
                return Err(error);
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
            // Each import reads a whole file: one per operation, however
            // spelt (aliases, fragments spread twice).
            if size.imports > 1 {
                return Err(refuse(
                    format!(
                        "the operation runs `importGraph` {} times; one import per operation",
                        size.imports
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
            if size.list_nesting > INTROSPECTION_LIST_NESTING {
                return Err(refuse(
                    format!(
                        "the operation nests more than {INTROSPECTION_LIST_NESTING} \
                         introspection lists inside one another"
                    ),
                    Some(operation.pos),
                ));
            }
            let introspection = size.meta_only && aliases == 0;
            let max_depth = if introspection {
                self.max_depth.max(INTROSPECTION_MAX_DEPTH)
            } else {
                self.max_depth
            };
            if size.depth > max_depth {
                // async-graphql's words, which clients have seen for years.
                return Err(refuse("Query is nested too deep.".to_owned(), None));
            }
        }
        // Fragments reckoned once each, however often spread.
        entities::check(doc, &entities, &effective, self.max_complexity)
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
        .set("code", ErrorCode::InvalidInput.as_str());
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

/// Memory the document cache may hold, in bytes (estimated).
const DOCUMENT_CACHE_BYTES: u64 = 32 * 1024 * 1024;

/// Longest query text the document cache keeps.
const MAX_CACHED_QUERY_BYTES: usize = 16 * 1024;

impl Limits {
    /// Refuses a text longer than `KITH_MAX_QUERY_BYTES`, unparsed.
    fn check_length(&self, query: &str) -> ServerResult<()> {
        if query.len() > self.max_query_bytes {
            return Err(refuse(
                format!(
                    "the query text is {} bytes; at most {} are allowed",
                    query.len(),
                    self.max_query_bytes
                ),
                None,
            ));
        }
        Ok(())
    }

    /// Admits `request`: its document must fit the limits. The document is
    /// handed to the executor parsed, so async-graphql does not parse it
    /// again. Done outside async-graphql's extension hooks: any extension
    /// sends every field of every request down the executor's slow path (a
    /// `ResolveInfo` and an extension chain per field).
    pub(crate) fn admit(&self, request: &mut Request) -> ServerResult<Admitted> {
        self.check_length(&request.query)?;
        if let Some(doc) = self.documents.get(&request.query) {
            request.set_parsed_query(ExecutableDocument::clone(&doc));
            self.check(&doc, &request.variables)?;
            return Ok(Admitted::of(&doc, request.operation_name.as_deref()));
        }
        // A copy kept for the cache once the executor has validated it (only
        // of ordinary-sized texts: the cache is for the few texts clients
        // send again and again, not for every text a client can make up).
        // A longer one is not copied at all: it lives in the request only.
        let text = (request.query.len() <= MAX_CACHED_QUERY_BYTES).then(|| request.query.clone());
        // The document borrows the request: what the checks read besides
        // it is set aside meanwhile.
        let variables = std::mem::take(&mut request.variables);
        let name = request.operation_name.take();
        // Parsed now, or already by [`Self::operation_type`].
        let admitted = request.parsed_query().and_then(|doc| {
            self.check(doc, &variables)?;
            let mut admitted = Admitted::of(doc, name.as_deref());
            admitted.parsed = text.map(|text| (text, Arc::new(doc.clone())));
            Ok(admitted)
        });
        request.variables = variables;
        request.operation_name = name;
        admitted
    }

    /// The type of the operation `request` selects: its document from the
    /// cache, or parsed now and left in the request, so that
    /// [`Self::admit`] does not parse it again.
    pub(crate) fn operation_type(
        &self,
        request: &mut Request,
    ) -> ServerResult<Option<OperationType>> {
        self.check_length(&request.query)?;
        let name = request.operation_name.clone();
        let admitted = match self.documents.get(&request.query) {
            Some(doc) => Admitted::of(&doc, name.as_deref()),
            None => Admitted::of(request.parsed_query()?, name.as_deref()),
        };
        Ok(admitted.ty)
    }

    /// Keeps the parsed document of a request the executor ran (it passed
    /// validation), so the same text is not parsed again.
    pub(crate) fn remember(&self, admitted: &mut Admitted) {
        if let Some((query, doc)) = admitted.parsed.take() {
            self.documents.insert(query, doc);
        }
    }
}

/// What an admitted document's selected operation is.
#[derive(Clone, Debug, Default)]
pub(crate) struct Admitted {
    /// Its name (also the one operation of a document that names it).
    pub operation: Option<String>,
    /// Its type, `None` when the document has no such operation (the
    /// executor refuses it).
    pub ty: Option<OperationType>,
    /// A text parsed for this request, with its document: what
    /// [`Limits::remember`] keeps once the executor has validated it.
    parsed: Option<(String, Arc<ExecutableDocument>)>,
}

impl Admitted {
    /// The operation of `doc` a request naming `name` (or none) selects.
    pub(crate) fn of(doc: &ExecutableDocument, name: Option<&str>) -> Self {
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
                parsed: None,
            },
            None => Self::default(),
        }
    }
}
