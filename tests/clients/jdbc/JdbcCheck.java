// A pgjdbc smoke test, run by tests/clients/test_jdbc.py as a single-file Java program:
//   java -cp /usr/share/java/postgresql.jar JdbcCheck.java jdbc:postgresql://127.0.0.1:PORT/dev?user=root
// It creates a table, inserts with a PreparedStatement, and runs a parameterised SELECT more
// than prepareThreshold (5) times so pgjdbc switches to a named server-side statement with
// binary results. It prints one line per step and "JDBC OK" at the end; any mismatch throws,
// which makes the JVM exit non-zero with the message on stderr.

import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;

public class JdbcCheck {
    static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }

    public static void main(String[] args) throws Exception {
        String url = args[0];
        try (Connection conn = DriverManager.getConnection(url)) {
            check(conn.getAutoCommit(), "autocommit is on by default");
            try (Statement st = conn.createStatement()) {
                st.execute("DROP TABLE IF EXISTS jdbc_t");
                st.execute("CREATE TABLE jdbc_t (id INT PRIMARY KEY, name VARCHAR, score DOUBLE PRECISION, "
                        + "amount NUMERIC, big BIGINT, ok BOOLEAN)");
                System.out.println("created table");
            }
            try (PreparedStatement ins = conn.prepareStatement("INSERT INTO jdbc_t VALUES (?, ?, ?, ?, ?, ?)")) {
                for (int i = 1; i <= 7; i++) {
                    ins.setInt(1, i);
                    ins.setString(2, "name-" + i);
                    ins.setDouble(3, i * 1.5);
                    ins.setBigDecimal(4, new BigDecimal(i + ".25"));
                    ins.setLong(5, 10_000_000_000L + i);
                    ins.setBoolean(6, i % 2 == 0);
                    check(ins.executeUpdate() == 1, "insert " + i + " reports 1 row");
                }
                System.out.println("inserted 7 rows");
            }
            try (Statement st = conn.createStatement()) {
                st.execute("FLUSH");
            }
            try (PreparedStatement sel = conn.prepareStatement(
                    "SELECT id, name, score, amount, big, ok FROM jdbc_t WHERE id = ?")) {
                for (int round = 0; round < 8; round++) {
                    int id = (round % 7) + 1;
                    sel.setInt(1, id);
                    try (ResultSet rs = sel.executeQuery()) {
                        check(rs.next(), "row " + id + " found");
                        check(rs.getInt(1) == id, "id " + id);
                        check(rs.getString(2).equals("name-" + id), "name of " + id + ": " + rs.getString(2));
                        check(rs.getDouble(3) == id * 1.5, "score of " + id + ": " + rs.getDouble(3));
                        check(rs.getBigDecimal(4).compareTo(new BigDecimal(id + ".25")) == 0,
                                "amount of " + id + ": " + rs.getBigDecimal(4));
                        check(rs.getLong(5) == 10_000_000_000L + id, "big of " + id);
                        check(rs.getBoolean(6) == (id % 2 == 0), "ok of " + id);
                        check(!rs.next(), "one row for " + id);
                    }
                }
                System.out.println("selected 8 times with a parameter");
            }
            try (Statement st = conn.createStatement();
                 ResultSet rs = st.executeQuery("SELECT count(*), sum(big) FROM jdbc_t")) {
                check(rs.next(), "aggregate row");
                check(rs.getLong(1) == 7, "count: " + rs.getLong(1));
                check(rs.getLong(2) == 70_000_000_028L, "sum: " + rs.getLong(2));
            }
            try (Statement st = conn.createStatement()) {
                st.executeQuery("SELECT * FROM jdbc_nope");
                throw new AssertionError("selecting from a missing table succeeded");
            } catch (SQLException e) {
                check("42P01".equals(e.getSQLState()), "SQLSTATE " + e.getSQLState() + ": " + e.getMessage());
                System.out.println("error " + e.getSQLState());
            }
            try (Statement st = conn.createStatement()) {
                st.execute("DROP TABLE jdbc_t");
            }
        }
        System.out.println("JDBC OK");
    }
}
