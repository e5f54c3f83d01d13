// DatabaseMetaData over Swell's catalogs, the way DBeaver browses a database:
// getSchemas, getTables (tables, views, materialized views), getColumns, getPrimaryKeys,
// getTypeInfo, getIndexInfo. Prints one line per fact; the pytest wrapper compares them.
// Usage: java -cp postgresql.jar JdbcMetadata.java jdbc:postgresql://host:port/dev

import java.sql.*;
import java.util.*;

public class JdbcMetadata {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.setProperty("user", "root");
        try (Connection c = DriverManager.getConnection(args[0], props)) {
            try (Statement s = c.createStatement()) {
                s.execute("CREATE TABLE IF NOT EXISTS jm_t (id INT PRIMARY KEY, name VARCHAR, amount DOUBLE PRECISION)");
                s.execute("CREATE MATERIALIZED VIEW IF NOT EXISTS jm_mv AS SELECT name, count(*) AS n FROM jm_t GROUP BY name");
                s.execute("CREATE VIEW IF NOT EXISTS jm_v AS SELECT id FROM jm_t");
            }
            DatabaseMetaData md = c.getMetaData();
            System.out.println("product " + md.getDatabaseProductName() + " " + md.getDatabaseMajorVersion());
            List<String> schemas = new ArrayList<>();
            try (ResultSet rs = md.getSchemas()) {
                while (rs.next()) schemas.add(rs.getString("TABLE_SCHEM"));
            }
            System.out.println("schemas " + String.join(",", schemas));
            try (ResultSet rs = md.getTables(null, "public", "jm_%", null)) {
                while (rs.next()) {
                    System.out.println("table " + rs.getString("TABLE_NAME") + " " + rs.getString("TABLE_TYPE"));
                }
            }
            for (String t : new String[] {"jm_t", "jm_mv", "jm_v"}) {
                try (ResultSet rs = md.getColumns(null, "public", t, null)) {
                    while (rs.next()) {
                        System.out.println("column " + t + "." + rs.getString("COLUMN_NAME") + " "
                            + rs.getString("TYPE_NAME") + " " + rs.getInt("DATA_TYPE") + " "
                            + rs.getInt("ORDINAL_POSITION") + " " + rs.getString("IS_NULLABLE"));
                    }
                }
            }
            try (ResultSet rs = md.getPrimaryKeys(null, "public", "jm_t")) {
                while (rs.next()) {
                    System.out.println("pk " + rs.getString("COLUMN_NAME") + " " + rs.getInt("KEY_SEQ") + " " + rs.getString("PK_NAME"));
                }
            }
            try (ResultSet rs = md.getIndexInfo(null, "public", "jm_t", false, false)) {
                while (rs.next()) {
                    System.out.println("index " + rs.getString("INDEX_NAME") + " " + rs.getString("COLUMN_NAME") + " unique=" + !rs.getBoolean("NON_UNIQUE"));
                }
            }
            int types = 0;
            boolean sawInt4 = false;
            try (ResultSet rs = md.getTypeInfo()) {
                while (rs.next()) {
                    types++;
                    if ("int4".equals(rs.getString("TYPE_NAME"))) sawInt4 = true;
                }
            }
            System.out.println("typeinfo " + (types > 10) + " int4=" + sawInt4);
            try (PreparedStatement ps = c.prepareStatement("SELECT relname FROM pg_catalog.pg_class WHERE relname = ?")) {
                for (int i = 0; i < 7; i++) {
                    ps.setString(1, "jm_mv");
                    try (ResultSet rs = ps.executeQuery()) {
                        rs.next();
                        if (i == 6) System.out.println("prepared " + rs.getString(1));
                    }
                }
            }
            try (Statement s = c.createStatement()) {
                s.execute("DROP VIEW jm_v");
                s.execute("DROP MATERIALIZED VIEW jm_mv");
                s.execute("DROP TABLE jm_t");
            }
        }
    }
}
