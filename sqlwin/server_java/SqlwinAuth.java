package sqlwin;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import javax.security.sasl.AuthenticationException;

import org.apache.hive.service.auth.PasswdAuthenticationProvider;

/**
 * HiveServer2 CUSTOM authentication: one user name and the SHA-256 of its password, set
 * from Python before the server starts (nothing secret on the command line or in files).
 */
public class SqlwinAuth implements PasswdAuthenticationProvider {
    private static volatile String user;
    private static volatile byte[] passwordSha256;

    public static void configure(String expectedUser, String passwordSha256Hex) {
        user = expectedUser;
        passwordSha256 = hex(passwordSha256Hex);
    }

    @Override
    public void Authenticate(String name, String password) throws AuthenticationException {
        byte[] expected = passwordSha256;
        if (user == null || expected == null || name == null || password == null) {
            throw new AuthenticationException("sqlwin: authentication is not configured");
        }
        boolean userOk = MessageDigest.isEqual(
            user.getBytes(StandardCharsets.UTF_8), name.getBytes(StandardCharsets.UTF_8));
        boolean passwordOk = MessageDigest.isEqual(expected, sha256(password));
        if (!(userOk && passwordOk)) {
            throw new AuthenticationException("sqlwin: invalid user name or password");
        }
    }

    private static byte[] sha256(String text) {
        try {
            return MessageDigest.getInstance("SHA-256").digest(text.getBytes(StandardCharsets.UTF_8));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    private static byte[] hex(String text) {
        byte[] out = new byte[text.length() / 2];
        for (int i = 0; i < out.length; i++) {
            out[i] = (byte) Integer.parseInt(text.substring(2 * i, 2 * i + 2), 16);
        }
        return out;
    }
}
