package sqlwin;

import java.util.regex.Pattern;

import org.apache.spark.sql.AnalysisException;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.FunctionIdentifier;
import org.apache.spark.sql.catalyst.TableIdentifier;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.parser.ParameterContext;
import org.apache.spark.sql.catalyst.parser.ParseException;
import org.apache.spark.sql.catalyst.parser.ParserInterface;
import org.apache.spark.sql.catalyst.parser.SqlStatementSplitResult;
import org.apache.spark.sql.catalyst.parser.TemporalIdentifier;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import scala.Option;
import scala.collection.immutable.Map$;
import scala.collection.immutable.Seq;

/**
 * Spark's parser with a rewrite step in front: statements that mention a sqlwin keyword go
 * through the Python {@link Rewriter} first, so every JDBC session speaks sqlwin SQL.
 * Text without a keyword (most plain Spark SQL) never leaves the JVM.
 */
public class SqlwinParser implements ParserInterface {
    public static final String ERROR_PREFIX = "\u0001sqlwin-error\u0001";

    private static volatile Rewriter rewriter;
    private static volatile Pattern keywords = Pattern.compile("(?!)");
    // keywords, or the name of a stream or of a view over one: a statement's text (parsePlan), not a view's
    // stored text (parseQuery), which sqlwin checked when the view was made
    private static volatile Pattern routed = keywords;

    private final SparkSession session;
    private final ParserInterface delegate;

    public SqlwinParser(SparkSession session, ParserInterface delegate) {
        this.session = session;
        this.delegate = delegate;
    }

    /** Called once from Python: the callback and the regex that says a text may need it. */
    public static void install(Rewriter r, String keywordRegex) {
        keywords = Pattern.compile(keywordRegex, Pattern.CASE_INSENSITIVE);
        routed = keywords;
        rewriter = r;
    }

    /** Called from Python when the streams change: statements naming one go to the rewriter too. */
    public static void route(String regex) {
        routed = Pattern.compile(regex, Pattern.CASE_INSENSITIVE);
    }

    public static void uninstall() {
        rewriter = null;
    }

    private String rewrite(String sql) {
        return rewrite(sql, fromClient() ? routed : keywords);
    }

    /**
     * A statement a JDBC/ODBC client sent: the Thrift server parses it on one of its own threads (its handler and
     * background pools, named "HiveServer2-..."). SQL that sqlwin runs itself in this JVM (a server resuming its
     * streaming tables, a streaming query's micro-batches, a rewrite's analysis) names streams too and is not a
     * client's plain SQL over a stream.
     */
    private static boolean fromClient() {
        return Thread.currentThread().getName().startsWith("HiveServer2-");
    }

    private String rewrite(String sql, Pattern pattern) {
        Rewriter r = rewriter;
        if (r == null || sql == null || !pattern.matcher(sql).find()) {
            return sql;
        }
        String out;
        try {
            out = r.rewrite(sql, session);
        } catch (RuntimeException e) {
            throw error("sqlwin rewrite failed: " + e.getMessage());
        }
        // The Thrift server cancels a statement by interrupting its thread and cancelling its
        // job group; a job submitted after that would run unowned, so stop before Spark does.
        if (Thread.currentThread().isInterrupted()) {
            throw error("statement cancelled while sqlwin rewrote it");
        }
        if (out == null) {
            return sql;
        }
        if (out.startsWith(ERROR_PREFIX)) {
            throw error(out.substring(ERROR_PREFIX.length()));
        }
        return out;
    }

    /**
     * An AnalysisException without an error class, so JDBC clients see exactly our message;
     * thrown unchecked because parsePlan may only declare ParseException (Scala has no checks).
     */
    private static RuntimeException error(String message) {
        AnalysisException e = new AnalysisException(message, Option.empty(), Option.empty(),
            Option.empty(), Option.empty(), Map$.MODULE$.empty(), new org.apache.spark.QueryContext[0]);
        return SqlwinParser.<RuntimeException>sneaky(e);
    }

    @SuppressWarnings("unchecked")
    private static <T extends Throwable> T sneaky(Throwable e) throws T {
        throw (T) e;
    }

    @Override
    public LogicalPlan parsePlan(String sqlText) throws ParseException {
        return delegate.parsePlan(rewrite(sqlText));
    }

    @Override
    public LogicalPlan parsePlanWithParameters(String sqlText, ParameterContext ctx) throws ParseException {
        return delegate.parsePlanWithParameters(rewrite(sqlText), ctx);
    }

    @Override
    public LogicalPlan parseQuery(String sqlText) throws ParseException {
        return delegate.parseQuery(rewrite(sqlText, keywords));
    }

    @Override
    public Expression parseExpression(String sqlText) throws ParseException {
        return delegate.parseExpression(sqlText);
    }

    @Override
    public TableIdentifier parseTableIdentifier(String sqlText) throws ParseException {
        return delegate.parseTableIdentifier(sqlText);
    }

    @Override
    public FunctionIdentifier parseFunctionIdentifier(String sqlText) throws ParseException {
        return delegate.parseFunctionIdentifier(sqlText);
    }

    @Override
    public Seq<String> parseMultipartIdentifier(String sqlText) throws ParseException {
        return delegate.parseMultipartIdentifier(sqlText);
    }

    @Override
    public TemporalIdentifier parseTemporalTableIdentifier(String sqlText) throws ParseException {
        return delegate.parseTemporalTableIdentifier(sqlText);
    }

    @Override
    public StructType parseRoutineParam(String sqlText) throws ParseException {
        return delegate.parseRoutineParam(sqlText);
    }

    @Override
    public SqlStatementSplitResult splitStatements(String sqlText) {
        return delegate.splitStatements(sqlText);
    }

    @Override
    public StructType parseTableSchema(String sqlText) throws ParseException {
        return delegate.parseTableSchema(sqlText);
    }

    @Override
    public DataType parseDataType(String sqlText) throws ParseException {
        return delegate.parseDataType(sqlText);
    }
}
