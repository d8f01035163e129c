// Hive Gateway's runtime in front of Kith alone, for the bench's gateway
// phase: Kith's committed subgraph schema composed offline and the
// viewer's JWT forwarded, as docs/clients.md sets it up; one worker per
// core (Node.js cluster).
//
// node server.mjs <subgraph schema file> <kith url> <host> <port>
import cluster from "node:cluster";
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import { availableParallelism } from "node:os";
import { parse } from "graphql";
import { composeServices } from "@theguild/federation-composition";
import { createGatewayRuntime } from "@graphql-hive/gateway-runtime";

const [schemaFile, kithUrl, host, port] = process.argv.slice(2);
const workers = Number(process.env.GATEWAY_WORKERS ?? availableParallelism());

if (cluster.isPrimary && workers > 1) {
  for (let i = 0; i < workers; i++) cluster.fork();
  cluster.on("exit", (worker, code) => {
    console.error(`worker ${worker.process.pid} exited with ${code}`);
    process.exit(1);
  });
} else {
  const composed = composeServices([
    { name: "kith", typeDefs: parse(readFileSync(schemaFile, "utf8")), url: kithUrl },
  ]);
  if (composed.errors?.length) {
    console.error(composed.errors.map((e) => e.message).join("\n"));
    process.exit(1);
  }
  const gateway = createGatewayRuntime({
    supergraph: composed.supergraphSdl,
    logging: false,
    propagateHeaders: {
      fromClientToSubgraphs: ({ request }) => ({
        authorization: request.headers.get("authorization") ?? undefined,
      }),
    },
  });
  createServer(gateway).listen(Number(port), host);
}
