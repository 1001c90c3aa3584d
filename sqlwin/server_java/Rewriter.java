package sqlwin;

/**
 * Implemented in Python (py4j callback): turns one statement in sqlwin syntax into Spark SQL.
 * Returns null when the text needs no change, the Spark SQL otherwise, or
 * {@link SqlwinParser#ERROR_PREFIX} followed by the message of a sqlwin error.
 */
public interface Rewriter {
    String rewrite(String sql, Object session);
}
