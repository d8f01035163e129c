//! Limits on what one document may ask for, checked on the parsed document
//! before validation and long before any resolver runs — so a hostile
//! request is refused without a single database statement. Complexity
//! (page sizes times the cost of a row, offsets by the rows they skip) and
//! depth are checked by async-graphql's validation right after.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_graphql::extensions::{
    Extension, ExtensionContext, ExtensionFactory, NextExecute, NextParseQuery,
};
use async_graphql::parser::types::{
    DocumentOperations, ExecutableDocument, Field, Selection, SelectionSet,
};
use async_graphql::{Name, Pos, Positioned, Response, ServerError, ServerResult, Value, Variables};

use crate::config::Config;

/// The limits, from the configuration.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Most aliased fields in one document.
    pub max_aliases: usize,
    /// Most root fields in one operation (fragments at the root counted).
    pub max_root_fields: usize,
    /// Deepest `offset` argument.
    pub max_offset: i32,
}

impl Limits {
    /// The configured limits.
    pub fn new(config: &Config) -> Self {
        Self {
            max_aliases: config.max_aliases,
            max_root_fields: config.max_root_fields,
            max_offset: config.max_offset,
        }
    }

    fn check(&self, doc: &ExecutableDocument, variables: &Variables) -> ServerResult<()> {
        let mut aliases = 0;
        let mut first_alias = None;
        let mut visit = |field: &Positioned<Field>| -> ServerResult<()> {
            if field.node.alias.is_some() {
                aliases += 1;
                first_alias.get_or_insert(field.pos);
            }
            self.check_offset(field, variables)
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
        let operations: Vec<_> = match &doc.operations {
            DocumentOperations::Single(op) => vec![op],
            DocumentOperations::Multiple(ops) => ops.values().collect(),
        };
        for operation in operations {
            let roots = root_fields(&operation.node.selection_set.node, doc, 0);
            if roots > self.max_root_fields {
                return Err(refuse(
                    format!(
                        "the operation selects {roots} root fields; at most {} are allowed",
                        self.max_root_fields
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

/// Root fields of a selection set, counting through fragments (a fragment
/// cycle is a validation error; `depth` only keeps this from looping on one).
fn root_fields(set: &SelectionSet, doc: &ExecutableDocument, depth: usize) -> usize {
    if depth > 8 {
        return 0;
    }
    set.items
        .iter()
        .map(|item| match &item.node {
            Selection::Field(_) => 1,
            Selection::InlineFragment(f) => root_fields(&f.node.selection_set.node, doc, depth + 1),
            Selection::FragmentSpread(spread) => doc
                .fragments
                .get::<Name>(&spread.node.fragment_name.node)
                .map_or(0, |f| {
                    root_fields(&f.node.selection_set.node, doc, depth + 1)
                }),
        })
        .sum()
}

impl ExtensionFactory for Limits {
    fn create(&self) -> Arc<dyn Extension> {
        Arc::new(*self)
    }
}

/// Set by the `execute` hook: the request passed parsing and validation and
/// its resolvers ran. The HTTP layer answers `400` when it stays false.
#[derive(Default)]
pub struct ExecutionStarted(AtomicBool);

impl ExecutionStarted {
    /// True once execution began.
    pub fn get(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

#[async_graphql::async_trait::async_trait]
impl Extension for Limits {
    async fn parse_query(
        &self,
        ctx: &ExtensionContext<'_>,
        query: &str,
        variables: &Variables,
        next: NextParseQuery<'_>,
    ) -> ServerResult<ExecutableDocument> {
        let doc = next.run(ctx, query, variables).await?;
        self.check(&doc, variables)?;
        Ok(doc)
    }

    async fn execute(
        &self,
        ctx: &ExtensionContext<'_>,
        operation_name: Option<&str>,
        next: NextExecute<'_>,
    ) -> Response {
        if let Some(started) = ctx.data_opt::<Arc<ExecutionStarted>>() {
            started.0.store(true, Ordering::Relaxed);
        }
        next.run(ctx, operation_name).await
    }
}
