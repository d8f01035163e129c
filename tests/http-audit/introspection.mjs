// Introspects a live Kith the way tools do and checks the schema it learns:
//   node tests/http-audit/introspection.mjs <graphql url> <schema.graphql path>
// Sends the standard introspection queries — graphql-js's
// `getIntrospectionQuery()` with no options and with every option (what
// GraphiQL 4, Apollo Sandbox, GraphQL Code Generator, Postman and Altair
// send), and one unwrapping type references ten levels deep (graphql-js 17
// unwraps nine) — over POST and over GET. Each must answer without errors,
// and the schema built from each answer, printed as SDL, must equal the
// committed `schema.graphql` (both sorted, so only content counts; the one
// difference allowed is the fixed schema description async-graphql sends).
// Exits 0 when all hold, 1 otherwise.
import { readFileSync } from 'node:fs';
import {
  buildClientSchema,
  buildSchema,
  getIntrospectionQuery,
  lexicographicSortSchema,
  printSchema,
} from 'graphql';

const [url, schemaPath] = process.argv.slice(2);
if (!schemaPath) {
  console.error('usage: node introspection.mjs <graphql url> <schema.graphql path>');
  process.exit(2);
}
const sdl = (schema) => printSchema(lexicographicSortSchema(schema));
const committed = sdl(buildSchema(readFileSync(schemaPath, 'utf8')));

const allOptions = {
  descriptions: true,
  specifiedByUrl: true,
  directiveIsRepeatable: true,
  schemaDescription: true,
  inputValueDeprecation: true,
  oneOf: true,
};
const typeRef = (levels) =>
  levels === 0 ? 'kind name' : `kind name ofType { ${typeRef(levels - 1)} }`;
const deep = getIntrospectionQuery().replace(
  /fragment TypeRef on __Type \{[\s\S]*$/,
  `fragment TypeRef on __Type { ${typeRef(10)} }`,
);
// [query, whether it asks for scalars' `specifiedByURL`]
const queries = {
  'graphql-js default': [getIntrospectionQuery(), false],
  'graphql-js, every option': [getIntrospectionQuery(allOptions), true],
  'ten levels of ofType': [deep, false],
};
// What a query that does not ask for `specifiedByURL` can learn.
const withoutSpecifiedBy = committed.replace(/ @specifiedBy\(url: "[^"]*"\)/g, '');

let failed = false;
for (const [name, [query, specifiedBy]] of Object.entries(queries)) {
  for (const method of ['POST', 'GET']) {
    const response =
      method === 'POST'
        ? await fetch(url, {
            method,
            headers: { 'content-type': 'application/json', accept: 'application/json' },
            body: JSON.stringify({ query, operationName: 'IntrospectionQuery' }),
          })
        : await fetch(
            `${url}?${new URLSearchParams({ query, operationName: 'IntrospectionQuery' })}`,
            { headers: { accept: 'application/json' } },
          );
    const body = await response.json();
    if (body.errors) {
      failed = true;
      console.log(`FAIL ${name} over ${method}: ${JSON.stringify(body.errors)}`);
      continue;
    }
    // async-graphql answers `__schema { description }` with a fixed text of
    // its own; the schema itself has no description.
    if (body.data.__schema.description?.startsWith('A GraphQL Schema defines the capabilities')) {
      body.data.__schema.description = null;
    }
    const learnt = sdl(buildClientSchema(body.data));
    if (learnt !== (specifiedBy ? committed : withoutSpecifiedBy)) {
      failed = true;
      console.log(`FAIL ${name} over ${method}: the introspected schema differs from schema.graphql`);
      console.log(learnt);
      continue;
    }
    console.log(`ok: ${name} over ${method}`);
  }
}
process.exit(failed ? 1 : 0);
