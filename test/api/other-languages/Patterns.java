import java.nio.file.Files;
import java.nio.file.Path;
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;

/** Compiles each line of the file given (a pattern of the OpenAPI document) with java.util.regex; prints those that fail. */
public class Patterns {
  public static void main(String[] args) throws Exception {
    int compiled = 0;
    for (String pattern : Files.readAllLines(Path.of(args[0]))) {
      try {
        Pattern.compile(pattern);
        compiled++;
      } catch (PatternSyntaxException error) {
        System.out.println("FAIL " + pattern + ": " + error.getDescription());
      }
    }
    System.out.println("compiled " + compiled);
  }
}
