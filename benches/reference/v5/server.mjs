// PostGraphile V5 over Kith's tables, as the bench's reference: production
// mode, one worker per core, no mutations, and custom plans on every
// connection (see benches/suite/reference.rs).
import cluster from "node:cluster";
import { createServer } from "node:http";
import { availableParallelism } from "node:os";
import { postgraphile } from "postgraphile";
import { makePgService } from "postgraphile/adaptors/pg";
import { grafserv } from "postgraphile/grafserv/node";
import { PostGraphileAmberPreset } from "postgraphile/presets/amber";
import { pgSmartTags } from "postgraphile/utils";

// V5 orders and filters only by columns of indexes without a predicate;
// Kith's list indexes are partial (`WHERE active`). A team would tag the
// columns its queries use, as here.
const indexed = ["followed_at", "active", "from_user_id", "to_user_id"].map(
  (column) => ({
    kind: "attribute",
    match: `following.${column}`,
    tags: { behavior: ["+orderBy", "+filterBy"] },
  }),
);

const [url, schema, host, port, poolSize] = process.argv.slice(2);
const workers = Number(process.env.REFERENCE_WORKERS ?? availableParallelism());

if (cluster.isPrimary && workers > 1) {
  for (let i = 0; i < workers; i++) cluster.fork();
  cluster.on("exit", (worker, code) => {
    console.error(`worker ${worker.process.pid} exited with ${code}`);
    process.exit(1);
  });
} else {
  const preset = {
    extends: [PostGraphileAmberPreset],
    plugins: [pgSmartTags(indexed)],
    disablePlugins: [
      // Kith's own PL/pgSQL functions are not part of the tables' API.
      "PgProceduresPlugin",
      "PgMutationCreatePlugin",
      "PgMutationUpdateDeletePlugin",
    ],
    pgServices: [
      makePgService({
        connectionString: url,
        schemas: [schema],
        poolConfig: {
          max: Number(poolSize),
          // Each query runs as a named prepared statement with `active` as a
          // parameter; a generic plan cannot use the partial indexes.
          options: "-c plan_cache_mode=force_custom_plan",
        },
      }),
    ],
    grafserv: { host, port: Number(port), graphiql: false, watch: false },
    grafast: { explain: false },
  };
  const pgl = postgraphile(preset);
  const serv = pgl.createServ(grafserv);
  const server = createServer();
  serv.addTo(server).then(() => {
    server.listen(Number(port), host);
  }, (e) => {
    console.error(e);
    process.exit(1);
  });
}
