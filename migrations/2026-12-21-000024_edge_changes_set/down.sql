-- Back to migration 000023: edge changes of one actor per call.
DROP FUNCTION kith_change_edges(BIGINT[], BIGINT[], BOOLEAN[], UUID[], BIGINT, DOUBLE PRECISION);
